"""POST /v1/plan with two teams and a monthly cap on one, on the bundled snapshot: the capped team's
runs move to a bought machine to keep within the cap, or the plan says it cannot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings

WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e8}
JOBS = [{"name": "vision-ft", "workload": WORKLOAD, "runs_per_month": 20, "team": "vision"},
        {"name": "nlp-ft", "workload": WORKLOAD, "runs_per_month": 20, "team": "nlp"}]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("teams") / "gpucost.sqlite"
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}"))) as c:
        yield c


def _plan(c: TestClient, constraints: dict[str, object]) -> dict[str, object]:
    r = c.post("/v1/plan", json={"jobs": JOBS, "horizon_months": 3, "constraints": constraints})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def _team_month_usd(plan: dict[str, object], job: str, month: int) -> float:
    return sum(a["cost_usd"] for a in plan["assignments"] if a["job"] == job and a["month"] == month)  # type: ignore[index, union-attr]


def test_cap_on_one_team_shifts_its_runs_to_a_bought_machine(client: TestClient) -> None:
    free = _plan(client, {})
    uncapped = _team_month_usd(free, "vision-ft", 0)
    assert free["buy"] == [] and uncapped > 0
    cap = round(uncapped * 0.7, 2)
    capped = _plan(client, {"team_budgets": {"vision": cap}})
    assert capped["total_cost_usd"] is not None and capped["buy"], capped["budget_notes"]
    for m in range(3):
        assert _team_month_usd(capped, "vision-ft", m) <= cap + 0.01
    spend = [s for s in capped["team_spend"] if s["team"] == "vision"]  # type: ignore[union-attr, index]
    assert [s["month"] for s in spend] == [0, 1, 2] and all(s["within"] for s in spend)
    assert any(a["job"] == "vision-ft" and a["kind"] == "local" for a in capped["assignments"])  # type: ignore[union-attr, index]


def test_a_cap_it_cannot_meet_is_an_answer_with_the_reason(client: TestClient) -> None:
    # Nothing to buy and nothing to commit: every run is a rental the team pays for that month.
    r = client.post("/v1/plan", json={"jobs": JOBS, "horizon_months": 3, "allow_commitments": False,
                                      "constraints": {"team_budgets": {"vision": 1.0}, "include_local": False}})
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["total_cost_usd"] is None
    assert any("vision" in n and "cannot keep to $1.00" in n for n in plan["budget_notes"])


def test_a_commitment_is_capital_a_capped_team_may_run_on(client: TestClient) -> None:
    """Committed instances, like bought machines, are capital shared by the teams (capped by
    capex_budget_usd), not a team's monthly spend: a team capped at $1 a month runs on one."""
    plan = _plan(client, {"team_budgets": {"vision": 1.0}, "include_local": False})
    assert plan["total_cost_usd"] is not None and plan["commit"], plan["budget_notes"]
    for m in range(3):
        vision = [a for a in plan["assignments"] if a["job"] == "vision-ft" and a["month"] == m]  # type: ignore[union-attr, index]
        assert sum(a["cost_usd"] for a in vision) <= 1.0 + 0.01


def test_bad_team_budget_is_422(client: TestClient) -> None:
    r = client.post("/v1/plan", json={"jobs": JOBS, "constraints": {"team_budgets": {"vision": -5}}})
    assert r.status_code == 422
    assert any("team_budgets" in [str(p) for p in d["loc"]] for d in r.json()["detail"])
