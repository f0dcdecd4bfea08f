"""GeForce cards priced at what their tensor cores reach (``GEFORCE_GEMM_ATTAINABLE``, issue 18 third
pass), through HTTP and the CLI.

Published truth, copied here with its source: lambdal/deeplearning-benchmark
``pytorch/pytorch-train-throughput-fp16.csv`` (commit 0551cb70), BERT-base SQuAD fine-tune,
seq 384, fp16 (apex O2), one GPU: RTX 3090 172 sequences/s at batch 96 (66,048 tokens/s), A10 135
at batch 80 (51,840 tokens/s), the same GA102 chip. Batch sizes from pytorch-train-bs-fp16.csv.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
BERT = {"model": "bert-base", "precision": "fp16", "seq_len": 384, "gradient_checkpointing": False,
        "flash_attention": False, "tokens": 1e8}
RTX3090_TOKENS_S = 66_048.0  # 172 sequences/s x 384, batch 96
A10_TOKENS_S = 51_840.0  # 135 sequences/s x 384, batch 80


@pytest.fixture
def client(tmp_db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        yield c


def _post(client: TestClient, workload: dict, gpu: str) -> dict:
    r = client.post("/v1/estimate", json={"workload": workload, "gpu": gpu, "gpu_count": 1})
    assert r.status_code == 200, r.text
    return r.json()


def test_rtx3090_bert_over_http_is_near_lambdas_figure_and_above_the_a10(client: TestClient) -> None:
    rtx = _post(client, {**BERT, "micro_batch_size": 96}, "RTX3090")
    a10 = _post(client, {**BERT, "micro_batch_size": 80}, "A10")
    # Before the GeForce share the 3090 came out 23.5% too slow and 2% below the A10 (measured: 27%
    # above it); now 9% too slow.
    assert abs(rtx["tokens_per_second"] - RTX3090_TOKENS_S) / RTX3090_TOKENS_S <= 0.15, rtx["tokens_per_second"]
    assert abs(a10["tokens_per_second"] - A10_TOKENS_S) / A10_TOKENS_S <= 0.15, a10["tokens_per_second"]
    assert rtx["tokens_per_second"] > a10["tokens_per_second"]
    low, high = rtx["range"]["tokens_per_second"]
    assert low <= RTX3090_TOKENS_S <= high


def test_cli_prices_the_same_rtx3090_run(tmp_path) -> None:
    request = tmp_path / "lambda_bert_3090.json"
    request.write_text(json.dumps({"workload": {**BERT, "micro_batch_size": 96}, "gpu": "RTX3090"}))
    result = runner.invoke(app, ["estimate", "--request", str(request), "--gpu", "RTX3090", "--json"])
    assert result.exit_code == 0, result.output
    tps = json.loads(result.stdout)["tokens_per_second"]
    assert abs(tps - RTX3090_TOKENS_S) / RTX3090_TOKENS_S <= 0.15, tps
    flags = ["estimate", "--model", "bert-base", "--precision", "fp16", "--seq-len", "384", "--micro-batch-size",
             "96", "--no-gradient-checkpointing", "--tokens", "1e8", "--json"]
    on_3090 = runner.invoke(app, [*flags, "--gpu", "RTX3090"])
    on_a6000 = runner.invoke(app, [*flags, "--gpu", "RTXA6000"])  # workstation GA102: no GeForce share
    assert on_3090.exit_code == 0 and on_a6000.exit_code == 0, on_3090.output + on_a6000.output
    geforce = json.loads(on_3090.stdout)["details"]["matmul_efficiency"]
    workstation = json.loads(on_a6000.stdout)["details"]["matmul_efficiency"]
    # 0.75 (MATMUL_EFFICIENCY) x 1.23 (GeForce) against 0.75 x 0.90 (Ampere): the measured ratio of
    # the RTX 3090 Ti's and the A100's matmul shares, 1.01 / 0.74.
    assert geforce / workstation == pytest.approx((81 / 80) / (230 / 312), rel=0.01)
