"""``POST /v1/quote``'s quick route (``service.api.quick_quote``) gives what FastAPI's route gives:
the same status, headers and body for plain quotes (JSON and, by ``Accept``, Markdown), for the
requests it hands on (a query string, another content type, a body that does not parse or validate)
and for an error raised while the quote is computed. It answers the plain ones itself, a job it has
seen before on the event loop (``service.api.inline_quotes``) unless other work is admitted or
another client was served a moment ago."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from service.api import quick_quote
from service.api.app import create_app
from service.api.inline_quotes import InlineQuotes
from service.settings import Settings

WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e7}
JSON = {"content-type": "application/json"}

# (name, query, headers, body, answered by the quick route)
CASES: list[tuple[str, str, dict[str, str], bytes, bool]] = [
    ("plain", "", JSON, json.dumps({"workload": WORKLOAD}).encode(), True),
    ("restricted", "", {"content-type": "application/json; charset=utf-8"},
     json.dumps({"workload": {**WORKLOAD, "tokens": 3.3e7}, "constraints": {"gpus": ["A100"],
                 "providers": ["aws", "gcp"]}}).encode(), True),
    ("runs", "", JSON, json.dumps({"workload": {**WORKLOAD, "tokens": 4.1e7}, "runs": 4}).encode(), True),
    ("markdown by accept", "", {**JSON, "accept": "text/markdown"}, json.dumps({"workload": WORKLOAD}).encode(), True),
    ("nothing passes", "", JSON,
     json.dumps({"workload": WORKLOAD, "constraints": {"providers": ["nope"]}}).encode(), True),
    # Valid to the schema; the quote raises (a 422 from the app's handler for InvalidInput).
    ("unknown gpu", "", JSON, json.dumps({"workload": WORKLOAD, "constraints": {"gpus": ["NOPE9000"]}}).encode(), True),
    ("unknown model", "", JSON, json.dumps({"workload": {**WORKLOAD, "model": "no-such-model-7b"}}).encode(), True),
    # Pydantic's JSON parser reads these as json.loads does (the last of a repeated key wins).
    ("repeated key", "", JSON,
     b'{"workload": {"model": "bert-base", "tokens": 1e7}, "workload": ' + json.dumps(WORKLOAD).encode() + b"}", True),
    ("amount as a string", "", JSON, json.dumps({"workload": {**WORKLOAD, "tokens": "2.7e7"}}).encode(), True),
    ("line end after", "", JSON, json.dumps({"workload": WORKLOAD}).encode() + b"\r\n", True),
    # ... and refuses these, which json.loads reads: FastAPI's route answers them.
    ("byte-order mark", "", JSON, b"\xef\xbb\xbf" + json.dumps({"workload": WORKLOAD}).encode(), False),
    ("utf-16", "", JSON, json.dumps({"workload": WORKLOAD}).encode("utf-16"), False),
    ("unpaired surrogate", "", JSON, b'{"workload": {"model": "qwen2.5-\\ud800", "tokens": 2e7}}', False),
    ("markdown by query", "format=markdown", JSON, json.dumps({"workload": WORKLOAD}).encode(), False),
    ("bad format", "format=pdf", JSON, json.dumps({"workload": WORKLOAD}).encode(), False),
    ("broken json", "", JSON, b'{"workload": {"model": ', False),
    ("not utf-8", "", JSON, b'{"workload": "\xff"}', False),
    ("extra field", "", JSON, json.dumps({"workload": WORKLOAD, "max_usd": 1}).encode(), False),
    ("a list", "", JSON, b"[1, 2]", False),
    ("deep nesting", "", JSON, b'{"workload": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", False),  # json.loads recurses
    ("empty", "", JSON, b"", False),
    ("text/plain", "", {"content-type": "text/plain"}, json.dumps({"workload": WORKLOAD}).encode(), False),
    ("no content type", "", {}, json.dumps({"workload": WORKLOAD}).encode(), False),
]


def _app(db: Path, quick: bool) -> Any:
    app = create_app(Settings(db_url=f"sqlite:///{db}", answer_cache=False))
    if not quick:
        app.router.routes[:] = [r for r in app.router.routes if not isinstance(r, quick_quote.QuickRoute)]
    else:
        # Every job seen before counts as quick (the Python modules take longer than the served
        # compiled ones) and no quiet spell is waited for, so the cases below that repeat a job
        # are computed on the event loop.
        _quick_of(app).inline = InlineQuotes(app.state.limits, max_s=60.0, quiet_s=0.0)
    return app


def _quick_of(app: Any) -> quick_quote.QuickQuote:
    route = next(r for r in app.router.routes if isinstance(r, quick_quote.QuickRoute))
    return cast(quick_quote.QuickQuote, route.app)


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, TestClient]]:
    db = tmp_path_factory.mktemp("quick") / "gpucost.sqlite"
    with TestClient(_app(db, quick=True)) as quick, TestClient(_app(db, quick=False)) as plain:
        # Each opens its store on its first quote (that one is always FastAPI's: the store is not open yet).
        for c in (quick, plain):
            assert c.post("/v1/quote", json={"workload": WORKLOAD}).status_code == 200
        yield quick, plain


def _seen(r: Any) -> tuple[int, dict[str, str], Any]:
    headers = {k: v for k, v in r.headers.items() if k not in ("x-request-id", "content-length")}
    if r.headers.get("content-type") == "application/json" and r.status_code == 200:
        answer = r.json()
        answer.pop("solver")  # how long the solver took
        return r.status_code, headers, answer
    return r.status_code, {**headers, "content-length": r.headers.get("content-length")}, r.content


@pytest.mark.parametrize(("name", "query", "headers", "body", "quick"), CASES, ids=[c[0] for c in CASES])
def test_the_quick_route_answers_as_fastapis_does(
    clients: tuple[TestClient, TestClient], monkeypatch: pytest.MonkeyPatch,
    name: str, query: str, headers: dict[str, str], body: bytes, quick: bool,
) -> None:
    quick_client, plain_client = clients
    taken: list[bool] = []
    real = quick_quote.get_store

    async def counted(http: Any) -> Any:
        taken.append(True)
        return await real(http)

    monkeypatch.setattr(quick_quote, "get_store", counted)  # only the quick route's own call
    path = "/v1/quote" + (f"?{query}" if query else "")
    got = quick_client.post(path, content=body, headers=headers)
    want = plain_client.post(path, content=body, headers=headers)
    assert taken == ([True] if quick else []), name
    assert _seen(got) == _seen(want), name
    assert got.headers["x-request-id"] and want.headers["x-request-id"]


def _job_body(job: dict[str, Any], tokens: float) -> bytes:
    """A quote of ``job`` for ``tokens``: the same job, a new amount."""
    return json.dumps({"workload": {**job, "tokens": tokens}}).encode()


def _where_computed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Where each quick-route quote from now on is computed: on the event loop or a thread."""
    where: list[str] = []
    real = quick_quote.quote

    def recorded(*args: Any) -> Any:
        try:
            asyncio.get_running_loop()
            where.append("loop")
        except RuntimeError:
            where.append("thread")
        return real(*args)

    monkeypatch.setattr(quick_quote, "quote", recorded)
    return where


def test_a_job_seen_before_is_computed_on_the_event_loop_with_the_same_answers(
    clients: tuple[TestClient, TestClient], monkeypatch: pytest.MonkeyPatch,
) -> None:
    quick_client, plain_client = clients
    where = _where_computed(monkeypatch)
    job = {"model": "qwen2.5-0.5b", "method": "qlora", "seq_len": 768}  # asked by no other test
    for tokens in (1.1e7, 1.2e7, 1.3e7):
        body = _job_body(job, tokens)
        got = quick_client.post("/v1/quote", content=body, headers=JSON)
        want = plain_client.post("/v1/quote", content=body, headers=JSON)
        assert got.status_code == 200
        assert _seen(got) == _seen(want)
    assert where == ["thread", "loop", "loop"]


def test_with_other_work_admitted_a_job_seen_before_goes_to_a_thread(
    clients: tuple[TestClient, TestClient], monkeypatch: pytest.MonkeyPatch,
) -> None:
    quick_client, _ = clients
    where = _where_computed(monkeypatch)
    job = {"model": "qwen2.5-0.5b", "method": "lora", "seq_len": 640}  # asked by no other test
    solve = quick_client.app.state.limits.lanes["solve"]  # type: ignore[attr-defined]
    for tokens, plan_running in ((1.1e7, False), (1.2e7, True), (1.3e7, False)):
        body = _job_body(job, tokens)
        solve.running += plan_running  # a plan computing meanwhile, as its lane counts it
        try:
            assert quick_client.post("/v1/quote", content=body, headers=JSON).status_code == 200
        finally:
            solve.running -= plan_running
    assert where == ["thread", "thread", "loop"]


def test_a_quote_waits_for_other_clients_to_go_quiet_not_for_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The guard middleware tells each lane which connection a finished request came on: after
    another client's request, a known job goes to a thread; after the same client's, on the loop."""
    app = _app(tmp_path / "gpucost.sqlite", quick=True)
    # Any job seen counts as quick, and another client's request stays recent for a minute.
    _quick_of(app).inline = InlineQuotes(app.state.limits, max_s=60.0, quiet_s=60.0)
    job = {"model": "qwen2.5-0.5b", "method": "lora", "seq_len": 896}
    with TestClient(app, client=("10.0.0.1", 5001)) as first:
        assert first.post("/v1/quote", json={"workload": WORKLOAD}).status_code == 200  # opens the store
        second = TestClient(first.app, client=("10.0.0.2", 5002))
        where = _where_computed(monkeypatch)
        # A new job; then the same client again; then another client; then the first, after it.
        for client, tokens in ((first, 1.1e7), (first, 1.2e7), (second, 1.3e7), (first, 1.4e7)):
            assert client.post("/v1/quote", content=_job_body(job, tokens), headers=JSON).status_code == 200
    assert where == ["thread", "loop", "thread", "thread"]
