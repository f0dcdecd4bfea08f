"""Issue 18's new inputs through HTTP and the CLI: ``precision: "auto"`` (the default) and
``gradient_checkpointing: "offload"``; QLoRA sharded over GPUs."""

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
BERT = {"model": "bert-base", "tokens": 1e8}
LONG = {"model": "llama-3-8b", "method": "qlora", "stack": "fused", "micro_batch_size": 1, "seq_len": 32768,
        "lora_targets": "all-linear", "tokens": 1e8}


@pytest.fixture
def client(tmp_db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        yield c


def _post(client: TestClient, workload: dict, gpu: str, n: int = 1) -> dict:
    r = client.post("/v1/estimate", json={"workload": workload, "gpu": gpu, "gpu_count": n})
    assert r.status_code == 200, r.text
    return r.json()


def test_precision_auto_over_http(client: TestClient) -> None:
    t4 = _post(client, BERT, "T4")
    assert t4["recipe"]["precision"] == "fp16" and "precision" in t4["recipe"]["chosen"]
    assert not any("emulated" in w for w in t4["warnings"])
    a100 = _post(client, BERT, "A100")
    assert a100["recipe"]["precision"] == "bf16"
    pinned = _post(client, {**BERT, "precision": "bf16"}, "T4")
    assert pinned["recipe"]["precision"] == "bf16" and "precision" not in pinned["recipe"]["chosen"]
    assert t4["tokens_per_second"] > 2 * pinned["tokens_per_second"]
    assert _post(client, {**BERT, "precision": "auto"}, "T4")["tokens_per_second"] == t4["tokens_per_second"]


def test_checkpoint_offload_over_http(client: TestClient) -> None:
    off = _post(client, {**LONG, "gradient_checkpointing": "offload"}, "A100-80GB")
    gpu = _post(client, {**LONG, "gradient_checkpointing": True}, "A100-80GB")
    assert off["recipe"]["gradient_checkpointing"] == "offload"
    assert off["memory_gb"]["total_per_gpu"] < gpu["memory_gb"]["total_per_gpu"] - 7
    assert off["details"]["host_ram_parts_gb"]["offloaded_activations"] == pytest.approx(8.59, abs=0.01)
    assert "offloaded_activations" not in gpu["details"]["host_ram_parts_gb"]


def test_qlora_fsdp_70b_over_http(client: TestClient) -> None:
    w = {"model": "llama-3-70b", "method": "qlora", "micro_batch_size": 1, "seq_len": 2048,
         "gradient_checkpointing": True, "sharding": "fsdp", "tokens": 1e8}
    two, four = _post(client, w, "H100", 2), _post(client, w, "H100", 4)
    assert two["fits"] and four["memory_gb"]["total_per_gpu"] < two["memory_gb"]["total_per_gpu"]


@pytest.mark.parametrize(("field", "value"), [("gradient_checkpointing", "disk"), ("precision", "fp8")])
def test_bad_values_are_422_naming_the_field(client: TestClient, field: str, value: str) -> None:
    r = client.post("/v1/estimate", json={"workload": {**BERT, field: value}, "gpu": "T4", "gpu_count": 1})
    assert r.status_code == 422 and field in r.text


def test_cli_precision_auto_and_checkpoint_offload(tmp_path: Path) -> None:
    default = runner.invoke(app, ["estimate", "--model", "bert-base", "--gpu", "T4", "--json"])
    assert default.exit_code == 0, default.output
    assert json.loads(default.stdout)["recipe"]["precision"] == "fp16"
    explicit = runner.invoke(app, ["estimate", "--model", "bert-base", "--precision", "auto", "--gpu", "V100", "--json"])
    assert explicit.exit_code == 0 and json.loads(explicit.stdout)["recipe"]["precision"] == "fp16"
    req = tmp_path / "long.json"
    req.write_text(json.dumps({"workload": {**LONG, "gradient_checkpointing": "offload"}}))
    result = runner.invoke(app, ["estimate", "--request", str(req), "--gpu", "A100-80GB", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["recipe"]["gradient_checkpointing"] == "offload"
    assert body["details"]["host_ram_parts_gb"]["offloaded_activations"] > 8


def test_cli_bad_values_exit_2(tmp_path: Path) -> None:
    bad = runner.invoke(app, ["estimate", "--model", "gpt2", "--precision", "fp8", "--gpu", "T4"])
    assert bad.exit_code == 2 and "precision" in bad.output
    req = tmp_path / "bad.json"
    req.write_text(json.dumps({"workload": {**LONG, "gradient_checkpointing": "disk"}}))
    result = runner.invoke(app, ["estimate", "--request", str(req), "--gpu", "A100-80GB"])
    assert result.exit_code == 2 and "gradient_checkpointing" in result.output


def test_qlora_on_amd_is_refused_over_http_and_in_quotes(client: TestClient) -> None:
    r = client.post("/v1/estimate", json={"workload": {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8},
                                          "gpu": "MI300X", "gpu_count": 1})
    assert r.status_code == 422 and "ROCm" in r.text
    assert r.json()["detail"][0]["loc"][-2:] == ["workload", "method"]
    q = client.post("/v1/quote", json={"workload": {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8},
                                       "constraints": {"include_local": False}, "top": 50})
    assert q.status_code == 200, q.text
    body = q.json()
    assert all(o["gpu"] != "MI300X" for o in body["options"] + ([body["best"]] if body["best"] else []))
