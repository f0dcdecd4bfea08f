"""Commitments in the answers: quote and break-even per cloud option, and the team-year plan's
``commit`` decisions, through HTTP (TestClient) and the ``gpucost`` CLI on the bundled snapshot.

Reference figures (tests/data/commitments/reference_rows.csv, from the instances.vantage.sh export
of 2025-11-30): p4d.24xlarge on demand 21.957642 USD/h; 1yr standard All Upfront 12.993037 effective;
3yr standard All Upfront 8.159056 effective.
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

ON_DEMAND = 21.957642
ONE_YEAR = 12.993037
THREE_YEAR = 8.159056
runner = CliRunner()

# Full fine-tuning of llama-3-8b on one p4d.24xlarge (8 x A100); the tokens are scaled (``_sized``)
# so a run takes 50 h (BUSY: 10 runs = 500 h a month) or 20 h (LIGHT: one run a month), whatever
# the estimator's current speed.
BASE = {"model": "llama-3-8b", "method": "full", "tokens": 1_000_000_000}
AWS_A100 = {"providers": ["aws"], "gpus": ["A100"], "max_gpus": 8, "include_local": False}


def _plan_body(workload: dict, runs: float, **extra: object) -> dict:
    return {"jobs": [{"name": "team-a100", "workload": workload, "runs_per_month": runs}],
            "horizon_months": 12, "constraints": AWS_A100, **extra}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("commit") / "prices.db"
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}"))) as c:
        yield c


@pytest.fixture(scope="module")
def sized(client: TestClient) -> dict[str, dict]:  # type: ignore[type-arg]
    """BUSY and LIGHT workloads: BASE with tokens scaled to 50 h and 20 h a run on the plan's rental."""
    p = client.post("/v1/plan", json=_plan_body(BASE, 1)).json()
    per_run = p["assignments"][0]["hours_per_run"]
    return {name: {**BASE, "tokens": int(BASE["tokens"] * hours / per_run)} for name, hours in (("busy", 50), ("light", 20))}


def _hours(plan: dict) -> float:
    return sum(a["runs"] * a["hours_per_run"] for a in plan["assignments"])


def test_busy_year_commits_one_year_and_beats_on_demand(client: TestClient, sized: dict) -> None:  # type: ignore[type-arg]
    r = client.post("/v1/plan", json=_plan_body(sized["busy"], 10))
    assert r.status_code == 200, r.text
    p = r.json()
    hours = _hours(p)
    assert 5700 < hours < 6300  # ~500 h a month for 12 months
    assert p["buy"] == []
    [c] = p["commit"]
    assert {k: c[k] for k in ("provider", "instance_type", "kind", "term_months", "payment", "count", "start_month")} == {
        "provider": "aws", "instance_type": "p4d.24xlarge", "kind": "reserved", "term_months": 12,
        "payment": "all_upfront", "count": 1, "start_month": 0}
    # Paid for every hour of the year, used or not: the reference rate x 8,760 h.
    assert c["cost_usd"] == pytest.approx(ONE_YEAR * 8760, abs=0.01)
    # On demand, the same hours at the on-demand rate (per-second billing; storage aside).
    assert p["all_cloud_cost_usd"] == pytest.approx(hours * ON_DEMAND, rel=0.01)
    assert p["total_cost_usd"] < p["all_cloud_cost_usd"]
    assert p["total_cost_usd"] == pytest.approx(p["all_cloud_committed_cost_usd"])
    assert sum(m["total_usd"] for m in p["monthly"]) == pytest.approx(p["total_cost_usd"], abs=0.1)
    assert {a["pricing"] for a in p["assignments"]} == {"commitment"}


def test_value_after_horizon_lets_a_three_year_term_be_charged_for_the_year(client: TestClient, sized: dict) -> None:  # type: ignore[type-arg]
    p = client.post("/v1/plan", json=_plan_body(sized["busy"], 10, commitment_value_after_horizon=True)).json()
    [c] = p["commit"]
    assert (c["term_months"], c["charged_months"]) == (36, 12)
    assert c["cost_usd"] == pytest.approx(THREE_YEAR * 8760, abs=0.01)
    assert p["commitment_value_after_horizon"] is True


def test_light_use_commits_nothing_through_the_cli(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path, sized: dict) -> None:  # type: ignore[type-arg]
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    req = tmp_path / "plan.json"
    req.write_text(json.dumps(_plan_body(sized["light"], 1)))
    out = runner.invoke(app, ["plan", "--request", str(req), "--json"])
    assert out.exit_code == 0, out.output
    p = json.loads(out.stdout)
    assert 15 < _hours(p) / 12 < 25
    assert p["commit"] == [] and p["buy"] == []
    assert p["total_cost_usd"] == pytest.approx(p["all_cloud_cost_usd"])
    # The busy plan in Markdown names its commitment.
    req.write_text(json.dumps(_plan_body(sized["busy"], 10)))
    md = runner.invoke(app, ["plan", "--request", str(req), "--markdown"])
    assert md.exit_code == 0, md.output
    assert "Commit (paid whether used or not" in md.stdout
    assert "reserved standard, 12 mo, all upfront" in md.stdout


def test_with_local_builds_the_plan_compares_buying_committing_and_renting(client: TestClient) -> None:
    body = {"jobs": [{"name": "qlora", "workload": {"model": "llama-3-8b", "method": "qlora", "tokens": 800_000_000},
                      "runs_per_month": 10}],
            "horizon_months": 12, "constraints": {"providers": ["aws", "local"], "include_local": True}}
    p = client.post("/v1/plan", json=body).json()
    figures = [p["all_cloud_cost_usd"], p["all_cloud_committed_cost_usd"], p["all_local_cost_usd"]]
    assert None not in figures
    # Committing is a choice, never a cost; the chosen mix is no worse than any pure plan.
    assert p["all_cloud_committed_cost_usd"] <= p["all_cloud_cost_usd"] + 0.01
    assert p["total_cost_usd"] <= min(figures) + 0.01


def test_bad_commitment_flag_is_422_naming_it(client: TestClient) -> None:
    r = client.post("/v1/plan", json=_plan_body(BASE, 10, commitment_value_after_horizon="sometimes"))
    assert r.status_code == 422
    assert "commitment_value_after_horizon" in r.text


def test_quote_options_carry_commitments_with_breakeven_utilisation(client: TestClient) -> None:
    body = {"workload": BASE, "constraints": AWS_A100, "top": 3}
    q = client.post("/v1/quote", json=body).json()
    best = q["best"]
    assert best["instance_type"] == "p4d.24xlarge"
    terms = best["commitments"]
    assert terms, "p4d.24xlarge has reserved terms in the bundle"
    three = next(c for c in terms if c["kind"] == "reserved" and c["term_months"] == 36
                 and c["payment"] == "all_upfront" and c["offering_class"] == "standard")
    assert three["effective_hourly_usd"] == pytest.approx(THREE_YEAR, abs=1e-6)
    assert three["breakeven_utilization"] == pytest.approx(THREE_YEAR / ON_DEMAND, abs=1e-4)
    assert all(c["source"] and c["as_of"] for c in terms)
    md = client.post("/v1/quote?format=markdown", json=body)
    assert md.status_code == 200
    assert "break-even use" in md.text and "37%" in md.text


def test_breakeven_compares_buying_with_the_cheapest_commitment(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    req = tmp_path / "be.json"
    req.write_text(json.dumps({"workload": {"model": "llama-3-8b", "method": "qlora", "tokens": 300_000_000},
                               "rent": {"provider": "aws", "instance_type": "p4d.24xlarge"},
                               "buy": {"gpu": "RTX4090"}, "runs_per_month": 8}))
    out = runner.invoke(app, ["breakeven", "--request", str(req), "--json"])
    assert out.exit_code == 0, out.output
    r = json.loads(out.stdout)
    c = r["commitment"]
    assert (c["kind"], c["term_months"], c["payment"]) == ("reserved", 36, "all_upfront")
    assert c["effective_hourly_usd"] == pytest.approx(THREE_YEAR, abs=1e-6)
    assert c["cost_per_month_usd"] == pytest.approx(c["instances"] * 730 * THREE_YEAR, abs=0.01)
    # ~29 h a month of a 730-h instance: far below the 37 % it needs, so on demand is cheaper.
    assert c["utilization"] < c["breakeven_utilization"] and c["cheaper_than_on_demand"] is False
    assert c["breakeven_months"] is not None and c["breakeven_months"] < r["breakeven_months"]
    assert r["rent"]["option"]["commitments"]
    md = runner.invoke(app, ["breakeven", "--request", str(req), "--markdown"])
    assert md.exit_code == 0 and "| commit |" in md.stdout


def test_quote_table_prints_the_chosen_options_commitments(tmp_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_DB_URL", tmp_db_url)
    out = runner.invoke(app, ["quote", "--model", "llama-3-8b", "--method", "full", "--tokens", "1.5e9",
                              "--provider", "aws", "--gpu", "A100", "--max-gpus", "8", "--no-local"])
    assert out.exit_code == 0, out.output
    assert "commit: reserved standard, 36 mo, all upfront $8.1591/h" in out.stdout
    assert "pays above 37% use" in out.stdout
