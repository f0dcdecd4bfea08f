"""Every decision endpoint answers Markdown (``?format=markdown`` or ``Accept: text/markdown``)
that is stable (same inputs, same text) and holds a table; plans are charted as PNG and SVG; the
page at ``/`` and its files are served from the package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

WORKLOAD = {"model": "llama-3-8b", "method": "qlora", "micro_batch_size": 2, "seq_len": 2048,
            "gradient_checkpointing": True, "tokens": 1e8}
PLAN = {"jobs": [{"name": "weekly-qlora", "workload": WORKLOAD, "runs_per_month": 4, "deadline_hours": 48}],
        "horizon_months": 12}
BODIES = {
    "estimate": {"workload": WORKLOAD, "gpu": "RTX4090"},
    "quote": {"workload": WORKLOAD, "runs": 4},
    "breakeven": {"workload": WORKLOAD, "rent": {"gpu": "A10G"}, "buy": {"gpu": "RTX4090"}},
    "plan": PLAN,
    "recommend": {"workload": WORKLOAD, "budget_usd": 5000},
    "frontier": {"workload": WORKLOAD},
}
TITLES = {"estimate": "## Estimate on", "quote": "## GPU quote", "breakeven": "## Rent or buy",
          "plan": "## Portfolio plan", "recommend": "## Build recommendation", "frontier": "## Cost / time frontier"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("formats") / "gpucost.sqlite"
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}"))) as c:
        yield c


@pytest.mark.parametrize("endpoint", sorted(BODIES))
def test_markdown_is_a_stable_table(client: TestClient, endpoint: str) -> None:
    path, body = f"/v1/{endpoint}", BODIES[endpoint]
    first = client.post(path + "?format=markdown", json=body)
    assert first.status_code == 200, first.text
    assert first.headers["content-type"].startswith("text/markdown")
    text = first.text
    assert text.startswith(TITLES[endpoint])
    # A Markdown table: a header row followed by its |---| separator.
    lines = text.splitlines()
    seps = [i for i, line in enumerate(lines) if line.startswith("|---")]
    assert seps and all(lines[i - 1].startswith("| ") for i in seps)
    again = client.post(path + "?format=markdown", json=body)
    assert again.text == text, "same inputs must give the same text"
    by_header = client.post(path, json=body, headers={"accept": "text/markdown"})
    assert by_header.headers["content-type"].startswith("text/markdown") and by_header.text == text


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/json"),
        ("application/json, text/markdown;q=0.5", "application/json"),
        ("text/markdown;q=0.9, application/json;q=0.4", "text/markdown"),
        ("", "application/json"),
    ],
)
def test_accept_header_negotiation(client: TestClient, accept: str, expected: str) -> None:
    r = client.post("/v1/quote", json=BODIES["quote"], headers={"accept": accept})
    assert r.status_code == 200 and r.headers["content-type"].startswith(expected)


def test_format_query_wins_over_accept(client: TestClient) -> None:
    r = client.post("/v1/quote?format=json", json=BODIES["quote"], headers={"accept": "text/markdown"})
    assert r.headers["content-type"].startswith("application/json") and r.json()["best"] is not None


def test_markdown_quote_shows_each_options_recipe(client: TestClient) -> None:
    text = client.post("/v1/quote?format=markdown", json=BODIES["quote"]).text
    header = next(line for line in text.splitlines() if line.startswith("| # |"))
    assert "recipe" in header.split(" | ")
    col = header.split(" | ").index("recipe")
    rows = [line for line in text.splitlines() if line.startswith("| 1") or line.startswith("| 2")]
    assert rows and all(row.split(" | ")[col] not in ("", "-") for row in rows)


def test_unknown_format_is_422(client: TestClient) -> None:
    r = client.post("/v1/plan?format=pdf", json=PLAN)
    assert r.status_code == 422 and "format" in r.text


@pytest.mark.parametrize(("fmt", "magic"), [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_plan_chart(client: TestClient, fmt: str, magic: bytes) -> None:
    r = client.post(f"/v1/plan?format={fmt}", json=PLAN)
    assert r.status_code == 200 and r.content.startswith(magic)
    if fmt == "svg":
        assert "Monthly cost: bought vs rented" in r.text and "Cumulative cost" in r.text
        assert client.post(f"/v1/plan?format={fmt}", json=PLAN).content == r.content  # deterministic


def test_page_and_its_files_are_served(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<form id="job"' in page.text and "https://" not in page.text  # no CDN
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
        assert "https://" not in r.text
    assert client.get("/static/../pyproject.toml").status_code == 404
    assert client.get("/static/index.html").status_code == 404
    assert "/" not in client.get("/openapi.json").json()["paths"]
