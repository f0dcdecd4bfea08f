"""``/metrics``: requests labelled by route template (cache hits, refusals and /openapi.json
included), process metrics, and the age of each provider's prices."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from service.settings import Settings


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_metrics_label_routes_by_template_and_report_process_and_price_age(tmp_path: Path) -> None:
    body = {"workload": {"model": "gpt2", "tokens": 1e8}}
    with TestClient(create_app(Settings(db_url=f"sqlite:///{tmp_path / 'p.sqlite'}"))) as c:
        assert c.get("/readyz").status_code == 200
        c.post("/v1/quote", json=body)
        hit = c.post("/v1/quote", json=body)
        assert hit.headers.get("x-answer-cache") == "hit"
        assert c.get("/openapi.json").status_code == 200
        assert c.get("/static/app.js").status_code == 200
        assert c.get("/no/such/page").status_code == 404
        as_of = c.app.state.store.prices_as_of()  # type: ignore[attr-defined]
        scraped_at = datetime.now(UTC).timestamp()
        samples = _samples(c.get("/metrics").text)

    requests = {(lab["method"], lab["route"], lab["status"]): v for lab, v in samples["gpucost_http_requests_total"]}
    assert requests[("POST", "/v1/quote", "200")] == 2  # the cache hit is counted under its route
    assert requests[("GET", "/openapi.json", "200")] == 1
    assert requests[("GET", "/static/{name}", "200")] == 1
    assert requests[("GET", "unmatched", "404")] == 1  # only what no route serves
    assert sum(v for (_, route, status), v in requests.items() if route == "unmatched" and status != "404") == 0

    assert samples["process_resident_memory_bytes"][0][1] > 10e6
    assert samples["process_cpu_seconds_total"][0][1] > 0

    ages = {lab["provider"]: v for lab, v in samples["gpucost_prices_age_seconds"]}
    assert set(ages) == set(as_of) and ages
    for provider, stamp in as_of.items():
        expected = scraped_at - (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
        assert abs(ages[provider] - expected) < 60, provider


def test_a_refused_request_is_labelled_by_its_route(tmp_path: Path) -> None:
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'p.sqlite'}", max_body_bytes=2048)
    with TestClient(create_app(settings)) as c:
        assert c.post("/v1/quote", content=b"x" * 5000, headers={"content-type": "application/json"}).status_code == 413
        samples = _samples(c.get("/metrics").text)
    labels = [lab for lab, _ in samples["gpucost_http_requests_total"] if lab["status"] == "413"]
    assert labels == [{"method": "POST", "route": "/v1/quote", "status": "413"}]


def test_a_served_process_freezes_what_outlives_each_request(tmp_path: Path) -> None:
    """``gpucost serve`` freezes its heap at the end of every request (``service.api.heap``): the
    offers and memos a quote made are out of the cycle collector's walk when the next one starts,
    so no collection walks them again (``gpucost_heap_frozen_objects`` grows with each new model)."""
    import json
    import urllib.request

    from tests.integration._live_server import running_server

    with running_server(f"sqlite:///{tmp_path / 'p.sqlite'}", tmp_path / "serve.log") as base:
        frozen: list[float] = []
        for i in range(3):
            model = {"params_b": round(0.3 + 0.001 * i, 3), "name": f"heap-{i}"}
            body = json.dumps({"workload": {"model": model, "method": "lora", "tokens": 1e8}}).encode()
            req = urllib.request.Request(f"{base}/v1/quote", data=body, headers={"content-type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                assert resp.status == 200
            with urllib.request.urlopen(f"{base}/metrics", timeout=10) as resp:
                samples = _samples(resp.read().decode())
            frozen.append(samples["gpucost_heap_frozen_objects"][0][1])
    assert frozen[0] > 100_000, "the offers, the memos and the first quote's estimates are frozen"
    # Each new model's estimates, kept in the memos, are frozen at the end of its request.
    assert frozen[0] < frozen[1] < frozen[2]
