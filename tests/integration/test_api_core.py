"""The service's own surface: health, catalog, estimate, error mapping, metrics, admin gate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

WORKLOAD = {"model": "llama-3-8b", "method": "qlora", "micro_batch_size": 4, "seq_len": 2048,
            "gradient_checkpointing": True, "tokens": 1e8}


@pytest.fixture
def client(tmp_db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(db_url=tmp_db_url))) as c:
        yield c


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_gpus_and_models(client: TestClient) -> None:
    names = {g["name"] for g in client.get("/v1/gpus").json()["gpus"]}
    assert {"A100-80GB", "RTX4090", "H100", "L4", "RTX6000Ada"} <= names
    presets = {m["name"] for m in client.get("/v1/models").json()["models"]}
    for name in ["bert-base", "distilbert", "tinybert", "roberta-base", "gpt2", "llama-2-7b", "llama-3-8b",
                 "mistral-7b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b"]:
        assert name in presets


def test_estimate_contract_shape(client: TestClient) -> None:
    r = client.post("/v1/estimate", json={"workload": WORKLOAD, "gpu": "rtx 4090", "gpu_count": 1})
    assert r.status_code == 200, r.text
    body = r.json()
    for key in ("params", "trainable_params", "memory_gb", "gpu_vram_gb", "fits", "train_flops",
                "tokens_per_second", "mfu", "hours", "host"):
        assert key in body
    assert set(body["memory_gb"]) >= {"weights", "gradients", "optimizer", "activations", "overhead",
                                      "total_per_gpu"}
    assert set(body["host"]) >= {"ram_gb", "cpu_cores", "disk_gb"}
    assert body["gpu_vram_gb"] == 24
    assert 7.5e9 < body["params"] < 8.5e9
    assert body["trainable_params"] < body["params"] / 50
    parts = sum(body["memory_gb"][k] for k in ("weights", "gradients", "optimizer", "activations", "overhead"))
    assert body["memory_gb"]["total_per_gpu"] == pytest.approx(parts, rel=0.02)
    assert body["fits"] == (body["memory_gb"]["total_per_gpu"] <= body["gpu_vram_gb"])
    assert body["hours"] > 0 and body["tokens_per_second"] > 0


@pytest.mark.parametrize(
    ("payload", "loc_part", "msg_part"),
    [
        ({"workload": WORKLOAD, "gpu": "RTX 4099"}, "gpu", "did you mean"),
        ({"workload": {**WORKLOAD, "model": "llama-9-8b"}, "gpu": "A100"}, "model", "unknown model"),
        ({"workload": {**WORKLOAD, "tokens": 1e30}, "gpu": "A100"}, "tokens", ""),
        ({"workload": {**WORKLOAD, "micro_batch_size": -1}, "gpu": "A100"}, "micro_batch_size", ""),
        ({"gpu": "A100"}, "workload", "required"),
        ({"workload": WORKLOAD, "gpu": "A100", "gpu_count": 0}, "gpu_count", ""),
    ],
)
def test_bad_input_is_422_naming_the_field(
    client: TestClient, payload: dict[str, object], loc_part: str, msg_part: str
) -> None:
    r = client.post("/v1/estimate", json=payload)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert any(loc_part in [str(p) for p in d["loc"]] for d in detail), detail
    assert any(msg_part.lower() in d["msg"].lower() for d in detail), detail


def test_malformed_json_is_422(client: TestClient) -> None:
    r = client.post("/v1/estimate", content=b'{"workload": ', headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["type"] == "json_invalid"


def test_bad_hf_config_is_422(client: TestClient) -> None:
    r = client.post(
        "/v1/estimate",
        json={"workload": {**WORKLOAD, "model": {"hf_config": {"model_type": "mamba2", "hidden_size": 768}}},
              "gpu": "A100"},
    )
    assert r.status_code == 422
    assert "mamba2" in r.text


def test_metrics_count_requests(client: TestClient) -> None:
    client.get("/healthz")
    text = client.get("/metrics").text
    assert 'gpucost_http_requests_total{method="GET",route="/healthz",status="200"}' in text


def test_admin_endpoints_closed_without_token(client: TestClient) -> None:
    assert client.post("/v1/prices/refresh").status_code == 403


def test_admin_endpoints_need_the_right_token(tmp_db_url: str) -> None:
    with TestClient(create_app(Settings(db_url=tmp_db_url, admin_token="s3cret"))) as c:
        assert c.post("/v1/prices/refresh", headers={"Authorization": "Bearer nope"}).status_code == 403
