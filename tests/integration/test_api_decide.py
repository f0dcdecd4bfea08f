"""The decision endpoints on the bundled snapshot: quote, breakeven (JSON and charts), plan,
recommend, frontier, and their bad-input answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

WORKLOAD = {"model": "llama-3-8b", "method": "qlora", "micro_batch_size": 2, "seq_len": 2048,
            "gradient_checkpointing": True, "tokens": 1e8}
OPTION_KEYS = {"kind", "provider", "region", "instance_type", "gpu", "gpus_per_node", "nodes", "pricing",
               "hourly_usd", "hours", "cost_usd", "memory_need_gb_per_gpu", "vram_gb_per_gpu", "sharding",
               "cost_breakdown"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("decide") / "gpucost.sqlite"
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}"))) as c:
        yield c


def test_quote_contract_shape(client: TestClient) -> None:
    r = client.post("/v1/quote", json={"workload": WORKLOAD, "runs": 4, "top": 5})
    assert r.status_code == 200, r.text
    q = r.json()
    assert {"best", "options", "rejected", "prices_as_of", "snapshot_id", "solver"} <= set(q)
    assert OPTION_KEYS <= set(q["best"])
    assert q["solver"]["status"] == "Optimal" and q["solver"]["name"] in ("HiGHS", "CBC", "HiGHS_CMD")
    assert len(q["options"]) <= 5 and q["options"][0] == q["best"]
    costs = [o["cost_usd"] for o in q["options"]]
    assert costs == sorted(costs)
    assert {"aws", "local"} <= set(q["prices_as_of"])
    # One run: renting is far cheaper, yet the answer still shows the best machine to buy.
    one = client.post("/v1/quote", json={"workload": WORKLOAD, "top": 5}).json()
    assert one["best"]["kind"] == "cloud"
    assert [o["kind"] for o in one["options"]][-1] == "local" and len(one["options"]) == 5


def test_quote_as_markdown_names_the_choice_and_sources(client: TestClient) -> None:
    body = {"workload": WORKLOAD, "top": 3}
    best = client.post("/v1/quote", json=body).json()["best"]
    r = client.post("/v1/quote?format=markdown", json=body)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    text = r.text
    assert text.startswith("## ") and "| # |" in text
    assert best["instance_type"] in text.split("**Cheapest:**", 1)[1].splitlines()[0]
    assert "Prices:" in text and "as of" in text


def test_quote_infeasible_is_200_with_reasons(client: TestClient) -> None:
    r = client.post("/v1/quote", json={"workload": WORKLOAD, "constraints": {"deadline_hours": 0.01}})
    assert r.status_code == 200
    q = r.json()
    assert q["best"] is None and q["options"] == []
    assert any(g["reason"] == "misses deadline" and g["count"] > 0 for g in q["rejected"])


@pytest.mark.parametrize(
    ("body", "loc_part"),
    [
        ({"workload": WORKLOAD, "constraints": {"gpus": ["A1OOO"]}}, "constraints.gpus"),
        ({"workload": {**WORKLOAD, "tokens": -5}}, "tokens"),
        ({"workload": {**WORKLOAD, "model": "no-such-model"}}, "model"),
    ],
)
def test_quote_bad_input_is_422(client: TestClient, body: dict, loc_part: str) -> None:  # type: ignore[type-arg]
    r = client.post("/v1/quote", json=body)
    assert r.status_code == 422, r.text
    locs = [".".join(str(p) for p in d["loc"]) for d in r.json()["detail"]]
    assert any(loc_part in loc for loc in locs), locs


def test_breakeven_json_and_charts(client: TestClient) -> None:
    body = {"workload": WORKLOAD, "rent": {"gpu": "A100-80GB"}, "buy": {"gpu": "RTX4090"}, "runs_per_month": 4}
    r = client.post("/v1/breakeven", json=body)
    assert r.status_code == 200, r.text
    b = r.json()
    for side in ("rent", "buy"):
        assert b[side]["hours_per_run"] > 0 and b[side]["cost_per_run_usd"] > 0
    assert b["buy"]["capex_usd"] > 0 and "breakeven_runs" in b and "breakeven_months" in b
    assert b["rent"]["gpu"] == "A100-80GB" and b["buy"]["gpu"] == "RTX4090"
    png = client.post("/v1/breakeven?format=png", json=body)
    assert png.status_code == 200 and png.headers["content-type"] == "image/png" and png.content[:4] == b"\x89PNG"
    svg = client.post("/v1/breakeven?format=svg", json=body)
    assert svg.headers["content-type"].startswith("image/svg+xml") and b"<svg" in svg.content[:500]
    md = client.post("/v1/breakeven?format=markdown", json=body)
    assert md.status_code == 200 and "Break-even" in md.text


def test_breakeven_unknown_build_is_422(client: TestClient) -> None:
    body = {"workload": WORKLOAD, "rent": {"gpu": "A100"}, "buy": {"build": "no-such-build"}}
    r = client.post("/v1/breakeven", json=body)
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"][-1] in ("build", "buy.build") or "build" in str(r.json()["detail"][0]["loc"])


def test_plan(client: TestClient) -> None:
    body = {
        "jobs": [
            {"name": "weekly-qlora", "workload": WORKLOAD, "runs_per_month": 4, "deadline_hours": 48},
            {"name": "bert", "workload": {"model": "bert-base", "tokens": 1e9}, "runs_per_month": 2},
        ],
        "horizon_months": 12,
    }
    r = client.post("/v1/plan", json=body)
    assert r.status_code == 200, r.text
    p = r.json()
    assert {"buy", "assignments", "total_cost_usd", "all_cloud_cost_usd", "monthly", "solver"} <= set(p)
    assert p["solver"]["status"] == "Optimal"
    assert len(p["monthly"]) == 12
    assert p["total_cost_usd"] == pytest.approx(sum(m["total_usd"] for m in p["monthly"]), abs=0.5)
    assert p["total_cost_usd"] <= p["all_cloud_cost_usd"] + 1e-6
    runs = {}
    for a in p["assignments"]:
        runs[a["job"]] = runs.get(a["job"], 0) + a["runs"]
    assert runs == {"weekly-qlora": 48, "bert": 24}
    # The request's time guard wraps the estimator, and the rental search's cost floors still apply.
    assert p["rental_search"]["offers_skipped"] > 0 and p["rental_search"]["offers_priced"] > 0


def test_recommend(client: TestClient) -> None:
    r = client.post("/v1/recommend", json={"workload": WORKLOAD, "budget_usd": 5000})
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["recommendation"] is not None and rec["recommendation"]["price_usd"] <= 5000
    cats = {c["category"] for c in rec["recommendation"]["components"]}
    assert {"gpu", "cpu", "ram", "storage"} <= cats
    assert rec["best_rental"] is not None


def test_frontier(client: TestClient) -> None:
    r = client.post("/v1/frontier", json={"workload": WORKLOAD})
    assert r.status_code == 200, r.text
    pts = r.json()["points"]
    assert len(pts) >= 2
    assert [p["hours"] for p in pts] == sorted(p["hours"] for p in pts)
    assert all(a["cost_usd"] > b["cost_usd"] for a, b in zip(pts, pts[1:]))
    png = client.post("/v1/frontier?format=png", json={"workload": WORKLOAD})
    assert png.content[:4] == b"\x89PNG"
