"""Small requests that used to take the server down: unbounded model configs, stuck lanes, one
client's flood. Each through HTTP (TestClient), each bounded and answered quickly."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

# transformers' ResNetConfig for microsoft/resnet-50, with one stage 100 million blocks deep:
# ~400 bytes that used to compute for tens of minutes before the first time-limit check.
RESNET = {
    "model_type": "resnet", "layer_type": "bottleneck", "embedding_size": 64, "num_channels": 3,
    "hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 6, 3],
}
ATTACK = {**RESNET, "depths": [3, 4, 100_000_000, 3]}
VIT = {
    "model_type": "vit", "num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12,
    "intermediate_size": 3072, "patch_size": 16, "image_size": 224,
}
LLAMA = {
    "model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
}
NORMAL = {"workload": {"model": "gpt2", "tokens": 1e8}}


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(db_url=f"sqlite:///{tmp_path / 'prices.sqlite'}", **overrides)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(_settings(tmp_path))) as c:
        assert c.get("/readyz").status_code == 200
        yield c


def _request(path: str, model: Any) -> dict[str, Any]:
    workload = {"model": model, "samples": 1e6}
    if path == "/v1/estimate":
        return {"workload": workload, "gpu": "A100-80GB"}
    if path == "/v1/breakeven":
        return {"workload": workload, "rent": {"gpu": "A100-80GB"}, "buy": {"gpu": "RTX4090"}}
    if path == "/v1/plan":
        return {"jobs": [{"name": "a", "workload": workload}]}
    return {"workload": workload}


@pytest.mark.parametrize("path", ["/v1/estimate", "/v1/quote", "/v1/breakeven", "/v1/plan"])
def test_the_depths_attack_is_a_quick_422_naming_the_field(client: TestClient, path: str) -> None:
    started = time.perf_counter()
    r = client.post(path, json=_request(path, {"hf_config": ATTACK}))
    assert time.perf_counter() - started < 2
    assert r.status_code == 422, r.text[:300]
    (detail,) = r.json()["detail"]
    assert "hf_config.depths" in detail["msg"] and "1,000" in detail["msg"]


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**RESNET, "num_labels": 10**18}, "hf_config.num_labels"),
        ({**VIT, "num_labels": 1e18}, "hf_config.num_labels"),
        ({**RESNET, "depths": [3, 4, 6, 3, *[1] * 20]}, "hf_config.depths"),
        ({**RESNET, "depths": [3, 4, 6.5, 3]}, "hf_config.depths"),
        ({**RESNET, "depths": 7}, "hf_config.depths"),
        ({**RESNET, "hidden_sizes": [256, 512, 1024, 10**12]}, "hf_config.hidden_sizes"),
        ({**RESNET, "embedding_size": 10**9}, "hf_config.embedding_size"),
        ({**VIT, "image_size": 16_384, "patch_size": 1}, "hf_config.image_size"),
        # Each size within its own bound, the product a model nobody trains (~2e17 parameters).
        ({**LLAMA, "num_hidden_layers": 1000, "hidden_size": 131_072, "num_attention_heads": 1024,
          "num_key_value_heads": 1024, "intermediate_size": 1_048_576}, "parameters"),
    ],
)
def test_every_size_an_image_or_text_config_carries_is_bounded(
    client: TestClient, config: dict[str, Any], field: str
) -> None:
    r = client.post("/v1/estimate", json=_request("/v1/estimate", {"hf_config": config}))
    assert r.status_code == 422, r.text[:300]
    assert field in r.json()["detail"][0]["msg"]


@pytest.mark.parametrize("params_b", [1e-300, 0, 1e-9])
def test_a_model_too_small_to_price_is_a_422_not_a_free_answer(client: TestClient, params_b: float) -> None:
    r = client.post("/v1/quote", json={"workload": {"model": {"params_b": params_b}}})
    assert r.status_code == 422, r.text[:300]
    assert r.json()["detail"][0]["loc"][-1] == "params_b"


def test_the_largest_configs_allowed_still_answer_quickly(client: TestClient) -> None:
    deep = {**RESNET, "depths": [1000, 1000, 1000, 1000], "num_labels": 1_000_000}
    wide = {**VIT, "image_size": 4096, "patch_size": 4, "num_labels": 1_000_000}
    for model in (deep, wide):
        started = time.perf_counter()
        r = client.post("/v1/quote", json=_request("/v1/quote", {"hf_config": model}))
        assert r.status_code == 200, r.text[:300]
        assert time.perf_counter() - started < 10
        est = client.post("/v1/estimate", json=_request("/v1/estimate", {"hf_config": model}))
        assert est.status_code == 200 and 1e9 < est.json()["params"] <= 2e12, est.text[:300]
    # A real ResNet-50 config still gives torchvision's count (25,557,032 parameters).
    r = client.post("/v1/estimate", json=_request("/v1/estimate", {"hf_config": RESNET}))
    assert r.status_code == 200 and r.json()["params"] == 25_557_032


def test_six_attacks_then_a_normal_quote_answers_in_its_usual_time(client: TestClient) -> None:
    client.post("/v1/quote", json=NORMAL)  # warm: the first quote reads the offers
    started = time.perf_counter()
    client.post("/v1/quote", json={**NORMAL, "top": 9})
    usual = time.perf_counter() - started
    with ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(lambda _: client.post("/v1/quote", json=_request("/v1/quote", {"hf_config": ATTACK}))
                              .status_code, range(6)))
    assert codes == [422] * 6
    started = time.perf_counter()
    r = client.post("/v1/quote", json={**NORMAL, "top": 8})
    took = time.perf_counter() - started
    assert r.status_code == 200 and r.json()["best"] is not None
    assert took < max(2.0, 3 * usual), (took, usual)


# -- admission ----------------------------------------------------------------------------------


def _blocking_quotes(monkeypatch: pytest.MonkeyPatch, release: threading.Event) -> threading.Event:
    """Quotes that wait for ``release`` (at most 30 s): a lane held busy on purpose."""
    import service.api.routes.quote as quote_route

    real = quote_route.quote_answer
    started = threading.Event()

    def slow(req: Any, store: Any) -> Any:
        started.set()
        release.wait(30)
        return real(req, store)

    monkeypatch.setattr(quote_route, "quote_answer", slow)
    return started


def _in_background(c: TestClient, body: dict[str, Any], codes: list[int]) -> threading.Thread:
    t = threading.Thread(target=lambda: codes.append(c.post("/v1/quote", json=body).status_code))
    t.start()
    return t


def test_a_full_lane_answers_429_at_once_with_an_honest_retry_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    started = _blocking_quotes(monkeypatch, release)
    with TestClient(create_app(_settings(tmp_path, max_quotes=1, quote_queue=0))) as c:
        c.get("/readyz")
        codes: list[int] = []
        t = _in_background(c, NORMAL, codes)
        try:
            assert started.wait(10)
            time.sleep(3)  # the running quote has now taken 3 s
            began = time.perf_counter()
            refused = c.post("/v1/quote", json={**NORMAL, "top": 3})
            took = time.perf_counter() - began
            assert refused.status_code == 429 and took < 1.0, took
            # The lane's one worker is 3 s into a request: retrying in 1 s (the smoothed mean of
            # requests that finished) would be refused again.
            assert int(refused.headers["retry-after"]) >= 3
        finally:
            release.set()
            t.join(60)
        assert codes == [200]


def test_a_request_that_cannot_be_served_in_time_is_refused_now_not_at_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    started = _blocking_quotes(monkeypatch, release)
    settings = _settings(tmp_path, max_quotes=1, quote_queue=50, request_time_limit_s=2)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        c.get("/readyz")
        codes: list[int] = []
        t = _in_background(c, NORMAL, codes)
        try:
            assert started.wait(10)
            time.sleep(2.2)  # the running quote is past a whole time limit: the queue is no use
            began = time.perf_counter()
            refused = c.post("/v1/quote", json={**NORMAL, "top": 4})
            assert refused.status_code == 429 and time.perf_counter() - began < 1.0
        finally:
            release.set()
            t.join(60)


def test_one_clients_flood_does_not_starve_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    started = _blocking_quotes(monkeypatch, release)
    settings = _settings(tmp_path, max_quotes=4, quote_queue=8, max_requests_per_client=2)
    with TestClient(create_app(settings), client=("10.0.0.1", 5000)) as flood:
        flood.get("/readyz")
        other = TestClient(flood.app, client=("10.0.0.2", 5000))
        other.portal = flood.portal  # the same event loop as the app's lanes
        codes: list[int] = []
        threads = [_in_background(flood, {**NORMAL, "top": n}, codes) for n in (1, 2)]
        try:
            assert started.wait(10)
            deadline = time.monotonic() + 10
            while flood.app.state.limits.clients.in_flight.get("10.0.0.1", 0) < 2:  # type: ignore[attr-defined]
                assert time.monotonic() < deadline
                time.sleep(0.01)
            refused = flood.post("/v1/quote", json={**NORMAL, "top": 3})
            assert refused.status_code == 429 and "this client" in refused.json()["detail"]
            assert int(refused.headers["retry-after"]) >= 1
            release.set()  # the other caller's request is admitted and answered
            assert other.post("/v1/quote", json={**NORMAL, "top": 5}).status_code == 200
        finally:
            release.set()
            for t in threads:
                t.join(60)
        assert codes == [200, 200]
        assert flood.app.state.limits.clients.in_flight == {}  # type: ignore[attr-defined]
