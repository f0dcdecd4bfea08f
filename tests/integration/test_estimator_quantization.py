"""``workload.quantization`` (issue 18, estimator v3) through HTTP and the CLI.

``nf4`` (the default) is bitsandbytes' QLoRA; ``gptq`` is a GPTQ Int4 checkpoint trained through
auto-gptq's PyTorch unpacking (how QwenLM/Qwen's finetune.py runs Q-LoRA): more memory traffic per
forward call, no PEFT fp32 upcast. Qwen-14B's dimensions are its config.json's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.api.app import create_app
from service.cli import app
from service.settings import Settings

runner = CliRunner()
QWEN14B = {"params_b": 14.17, "layers": 40, "hidden": 5120, "heads": 40, "kv_heads": 40,
           "intermediate": 13696, "vocab": 152064}
SHORT = {"model": QWEN14B, "method": "qlora", "precision": "fp16", "micro_batch_size": 1, "seq_len": 256,
         "gradient_checkpointing": True, "lora_rank": 64, "lora_targets": "all-linear", "tokens": 1e8}


@pytest.fixture
def client(tmp_db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        yield c


def _post(client: TestClient, workload: dict) -> dict:
    r = client.post("/v1/estimate", json={"workload": workload, "gpu": "A100-80GB", "gpu_count": 1})
    assert r.status_code == 200, r.text
    return r.json()


def test_gptq_over_http_is_slower_and_not_upcast(client: TestClient) -> None:
    nf4 = _post(client, SHORT)
    assert _post(client, {**SHORT, "quantization": "nf4"})["tokens_per_second"] == nf4["tokens_per_second"]
    gptq = _post(client, {**SHORT, "quantization": "gptq"})
    # auto-gptq unpacks every weight through ~18.5 B of elementwise traffic per forward call.
    assert gptq["tokens_per_second"] < 0.9 * nf4["tokens_per_second"]
    # PEFT does not upcast a GPTQ model's other weights and residual stream to fp32.
    assert gptq["memory_gb"]["total_per_gpu"] < nf4["memory_gb"]["total_per_gpu"] - 1.0


def test_gptq_only_changes_qlora(client: TestClient) -> None:
    lora = {**SHORT, "method": "lora"}
    gptq = _post(client, {**lora, "quantization": "gptq"})
    assert gptq["tokens_per_second"] == _post(client, lora)["tokens_per_second"]


def test_bad_quantization_is_422_naming_the_field(client: TestClient) -> None:
    r = client.post("/v1/estimate", json={"workload": {**SHORT, "quantization": "int3"}, "gpu": "A100-80GB",
                                          "gpu_count": 1})
    assert r.status_code == 422 and "quantization" in r.text


def _cli(*args: str) -> dict:
    result = runner.invoke(app, ["estimate", *args, "--gpu", "A100-80GB", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_quantization_flag_and_request_file(tmp_path: Path) -> None:
    flags = ("--model", "llama-3-8b", "--method", "qlora", "--seq-len", "256", "--micro-batch-size", "1")
    nf4 = _cli(*flags)
    gptq = _cli(*flags, "--quantization", "gptq")
    assert gptq["memory_gb"]["total_per_gpu"] < nf4["memory_gb"]["total_per_gpu"]
    req = tmp_path / "gptq.json"
    req.write_text(json.dumps({"workload": {**SHORT, "quantization": "gptq"}}))
    from_file = _cli("--request", str(req))
    assert from_file["tokens_per_second"] < 0.9 * _cli("--request", str(_write(tmp_path, SHORT)))["tokens_per_second"]


def _write(tmp_path: Path, workload: dict) -> Path:
    path = tmp_path / "nf4.json"
    path.write_text(json.dumps({"workload": workload}))
    return path


def test_cli_bad_quantization_exits_2() -> None:
    bad = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--method", "qlora", "--quantization", "int3",
                              "--gpu", "A100-80GB"])
    assert bad.exit_code == 2 and "quantization" in bad.output
