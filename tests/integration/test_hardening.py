"""The API under abuse: absurd inputs, odd tokens, big bodies, floods of expensive requests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

BERT = {
    "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "vocab_size": 30522,
}
DECISIONS = ("/v1/quote", "/v1/frontier", "/v1/estimate")


def _client(tmp_path: Path, **overrides: Any) -> TestClient:
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'prices.sqlite'}", admin_token="s\u00e9cret", **overrides)
    return TestClient(create_app(settings))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path) as c:
        yield c


def _body(path: str, workload: dict[str, Any]) -> dict[str, Any]:
    if path == "/v1/estimate":
        return {"workload": workload, "gpu": "A100-80GB"}
    return {"workload": workload}


@pytest.mark.parametrize("path", DECISIONS)
@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"num_hidden_layers": 1e308}, "num_hidden_layers"),
        ({"num_hidden_layers": 10**30}, "num_hidden_layers"),
        ({"type_vocab_size": -5}, "type_vocab_size"),
        ({"hidden_size": 768.5}, "hidden_size"),
        ({"vocab_size": True}, "vocab_size"),
    ],
)
def test_absurd_model_configs_are_422_naming_the_field(
    client: TestClient, path: str, bad: dict[str, Any], field: str
) -> None:
    r = client.post(path, json=_body(path, {"model": {"hf_config": {**BERT, **bad}}, "tokens": 1e8}))
    assert r.status_code == 422, r.text
    (detail,) = r.json()["detail"]
    assert detail["loc"][:3] == ["body", "workload", "model"]
    assert f"hf_config.{field}" in detail["msg"]


def test_a_sane_config_still_prices_positively(client: TestClient) -> None:
    r = client.post("/v1/quote", json={"workload": {"model": {"hf_config": BERT}, "tokens": 1e8}})
    assert r.status_code == 200, r.text
    best = r.json()["best"]
    assert best is not None and best["cost_usd"] > 0 and best["hours"] > 0


def test_huge_and_deep_configs_are_refused(client: TestClient) -> None:
    big = {**BERT, "id2label": {str(i): "x" * 40 for i in range(8000)}}  # ~400 kB, under the body limit
    r = client.post("/v1/quote", json={"workload": {"model": {"hf_config": big}}})
    assert r.status_code == 422 and "bytes" in r.json()["detail"][0]["msg"]
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(20):
        node["x"] = {}
        node = node["x"]
    r = client.post("/v1/quote", json={"workload": {"model": {"hf_config": {**BERT, "nested": deep}}}})
    assert r.status_code == 422 and "nested" in r.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/quote", {"workload": {"model": "x" * 1000}}),
        ("/v1/quote", {"workload": {"model": "gpt2"}, "constraints": {"providers": ["aws"] * 1000}}),
        ("/v1/quote", {"workload": {"model": "gpt2"}, "constraints": {"gpus": ["A" * 500]}}),
        ("/v1/breakeven", {"workload": {"model": "gpt2"}, "rent": {"gpu": "A" * 500}, "buy": {"gpu": "RTX4090"}}),
        ("/v1/plan", {"jobs": [{"name": f"j{i}", "workload": {"model": "gpt2"}} for i in range(501)]}),
    ],
)
def test_lists_and_strings_in_requests_are_bounded(client: TestClient, path: str, body: dict[str, Any]) -> None:
    assert client.post(path, json=body).status_code == 422


@pytest.mark.parametrize(
    "header",
    [b"Bearer s\xc3\xa9cret-but-wrong", b"Bearer \xe9\xe9\xe9", b"Bearer \xff\xfe", b"Basic \xff"],
)
def test_non_ascii_tokens_are_refused_not_500(client: TestClient, header: bytes) -> None:
    r = client.post("/v1/prices/refresh", headers={"Authorization": header})
    assert r.status_code in (401, 403), r.text


def test_the_right_non_ascii_token_is_accepted(client: TestClient) -> None:
    r = client.post(
        "/v1/prices/refresh?provider=no-such-source", headers={"Authorization": "Bearer s\u00e9cret".encode()}
    )
    # Authorised: the unknown source is the request's fault, named.
    assert r.status_code == 422 and "no-such-source" in r.text


def test_missing_token_is_401_with_a_challenge(client: TestClient) -> None:
    r = client.post("/v1/prices/refresh")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_request_id_is_echoed_or_made(client: TestClient) -> None:
    assert client.get("/healthz", headers={"X-Request-ID": "abc"}).headers["x-request-id"] == "abc"
    made = client.get("/healthz").headers["x-request-id"]
    assert len(made) == 32
    # An id that could forge log lines is replaced, not echoed.
    assert client.get("/healthz", headers={"X-Request-ID": "a\tb<script>"}).headers["x-request-id"] != "a\tb<script>"
    r = client.post("/v1/quote", json={"workload": {"model": "no-such-model"}}, headers={"X-Request-ID": "q-1"})
    assert r.status_code == 422 and r.headers["x-request-id"] == "q-1"


def test_bodies_over_one_megabyte_are_413(client: TestClient) -> None:
    r = client.post("/v1/quote", content=b" " * 5_000_000, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.headers["x-request-id"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b" " * 100_000

    r = client.post("/v1/quote", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_repeated_quotes_are_answered_from_the_cache_until_prices_change(client: TestClient) -> None:
    body = {"workload": {"model": "gpt2", "tokens": 1e8}}
    assert client.get("/readyz").status_code == 200  # opens the store: answers get a version
    first = client.post("/v1/quote", json=body)
    again = client.post("/v1/quote", json=body)
    assert again.headers.get("x-answer-cache") == "hit" and again.json() == first.json()
    assert client.post("/v1/quote", json={**body, "top": 3}).headers.get("x-answer-cache") is None
    store = client.app.state.store  # type: ignore[attr-defined]
    offers = [o for o in store.all_offers() if o.provider == "lambda"]
    from datetime import UTC, datetime

    cheaper = [o.model_copy(update={"price_hour": round(o.price_hour * 0.9, 4)}) for o in offers if o.price_hour]
    store.replace_rows("lambda", cheaper, fetched_at=datetime.now(UTC), source="test: 10% cheaper")
    assert client.post("/v1/quote", json=body).headers.get("x-answer-cache") is None


def test_a_write_from_another_connection_is_seen_by_the_next_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While nothing was committed, the cache's version is not read again (SQLite tells at once:
    ``PriceStore.change_mark``); a write from another connection to the file, as another process
    or replica makes it, is seen by the very next question."""
    from datetime import UTC, datetime

    from pricing.store import measurements
    from pricing.store.repository import open_store

    reads: list[int] = []
    real = measurements.measurements_version
    monkeypatch.setattr(measurements, "measurements_version", lambda store: reads.append(1) or real(store))
    body = {"workload": {"model": "gpt2", "tokens": 1e8}}
    with _client(tmp_path) as client:
        assert client.get("/readyz").status_code == 200
        first = client.post("/v1/quote", json=body)
        assert first.status_code == 200
        before = len(reads)
        assert before >= 1
        for _ in range(3):
            assert client.post("/v1/quote", json=body).headers.get("x-answer-cache") == "hit"
        assert len(reads) == before  # no write since: the version was not read again
        other = open_store(f"sqlite:///{tmp_path / 'prices.sqlite'}")
        try:
            offers = [o for o in other.all_offers() if o.provider == "lambda" and o.price_hour]
            cheaper = [o.model_copy(update={"price_hour": round(o.price_hour * 0.9, 4)}) for o in offers]
            other.replace_rows("lambda", cheaper, fetched_at=datetime.now(UTC), source="test: another writer")
        finally:
            other.close()
        after = client.post("/v1/quote", json=body)
        assert after.headers.get("x-answer-cache") is None
        assert len(reads) == before + 1
        assert after.json()["snapshot_id"] != first.json()["snapshot_id"]


def _blocking_plan(monkeypatch: pytest.MonkeyPatch, release: threading.Event, started: threading.Event) -> None:
    import service.api.routes.plan as plan_route

    real = plan_route.plan_answer

    def slow(req: Any, store: Any) -> Any:
        started.set()
        release.wait(30)
        return real(req, store)

    monkeypatch.setattr(plan_route, "plan_answer", slow)


def test_beyond_the_queue_expensive_requests_get_429_and_healthz_stays_quick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, started = threading.Event(), threading.Event()
    _blocking_plan(monkeypatch, release, started)
    plan = {"jobs": [{"name": "a", "workload": {"model": "gpt2", "tokens": 1e7}}]}
    with _client(tmp_path, max_solves=1, solve_queue=1) as c:
        c.get("/readyz")
        codes: list[int] = []
        threads = [threading.Thread(target=lambda: codes.append(c.post("/v1/plan", json=plan).status_code))
                   for _ in range(2)]
        for t in threads:
            t.start()
        assert started.wait(10)
        deadline = time.monotonic() + 10
        while c.app.state.limits.lanes["solve"].waiting < 1 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
        refused = c.post("/v1/plan", json=plan)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert c.get("/healthz").status_code == 200
        assert c.get("/readyz").status_code == 200
        # Quotes have a lane of their own: a full solve lane does not refuse them.
        assert c.post("/v1/quote", json={"workload": {"model": "gpt2"}}).status_code == 200
        release.set()
        for t in threads:
            t.join(60)
        assert sorted(codes) == [200, 200]


def test_one_time_limit_covers_the_whole_request(tmp_path: Path) -> None:
    # Every job a model of its own size: nothing one job estimated serves the next, so 300 of them
    # take far longer than the limit however fast the rest of a plan gets (three models at 300 token
    # counts, as this test once asked, are answered in about a second now).
    jobs = [
        {"name": f"job-{i}", "workload": {"model": {"params_b": round(0.2 + 0.01 * i, 3), "name": f"limit-{i}"},
                                          "method": ["full", "lora", "qlora"][i % 3], "tokens": 1e7 * (1 + i)}}
        for i in range(300)
    ]
    with _client(tmp_path, request_time_limit_s=1.0) as c:
        c.get("/readyz")
        started = time.monotonic()
        r = c.post("/v1/plan", json={"jobs": jobs, "time_limit_s": 600})
        elapsed = time.monotonic() - started
    assert r.status_code == 503, r.text[:300]
    assert "time limit of 1 s" in r.json()["detail"]
    # Stopped at the next estimate after the deadline, not after all 300 jobs.
    assert elapsed < 15


def test_work_stops_when_the_ticket_is_cancelled() -> None:
    from service.api.limits import Ticket, WorkStopped, guarded_estimator, reset_ticket, set_ticket

    calls: list[int] = []
    ticket = Ticket.start(60)
    token = set_ticket(ticket)
    try:
        est = guarded_estimator(lambda *a: calls.append(1))
        est()
        ticket.cancelled.set()
        with pytest.raises(WorkStopped, match="disconnected"):
            est()
    finally:
        reset_ticket(token)
    assert calls == [1]


def test_even_a_500_carries_the_request_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import service.api.routes.plan as plan_route

    def broken(req: Any, store: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(plan_route, "plan_answer", broken)
    settings = Settings(db_url=f"sqlite:///{tmp_path / 'prices.sqlite'}")
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        r = c.post("/v1/plan", json={"jobs": [{"name": "a", "workload": {"model": "gpt2"}}]},
                   headers={"X-Request-ID": "bug-1"})
    assert r.status_code == 500 and r.headers["x-request-id"] == "bug-1"


def test_refresh_honours_the_provider_query(client: TestClient) -> None:
    r = client.post("/v1/prices/refresh?provider=autodl", headers={"Authorization": "Bearer s\u00e9cret".encode()})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results and all(x["provider"] == "autodl" or x["note"] == "from source autodl" for x in results)
    status = client.get("/v1/prices/status").json()
    assert [run["source"] for run in status["runs"]] == ["autodl"]
    assert status["lease"] is None  # released after the run
