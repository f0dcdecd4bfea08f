"""``POST /v1/quote``'s quick route (``service.api.quick_quote``) gives what FastAPI's route gives:
the same status, headers and body for plain quotes (JSON and, by ``Accept``, Markdown), for the
requests it hands on (a query string, another content type, a body that does not parse or validate)
and for an error raised while the quote is computed. It answers the plain ones itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.api import quick_quote
from service.api.app import create_app
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
    return app


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
