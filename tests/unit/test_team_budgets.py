"""constraints.team_budgets in the plan ILP: a capped team's runs move to a bought machine to meet
its monthly cap while the other team stays in the cloud; a cap no option can meet is reported."""

from __future__ import annotations

from optimizer.estimator.workload import Constraints
from optimizer.plan import PlanJobInput, plan
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, build, offer, shardings

OFFERS = [offer("g5.xlarge", "A10G", 1, 1.0)]  # 10 h a run (FakeEstimator) + setup: about $10.10 a run
BUILDS = [build("rtx4090-box", "RTX4090", 2500.0)]
JOBS = [
    PlanJobInput(name="vision-ft", workload=WORKLOAD, runs_per_month=4, team="vision"),
    PlanJobInput(name="nlp-ft", workload=WORKLOAD, runs_per_month=4, team="nlp"),
]


def _plan(constraints: Constraints, builds: list = BUILDS):  # type: ignore[no-untyped-def, type-arg]
    return plan(JOBS, 3, constraints, OFFERS, builds, estimator=FakeEstimator(), shardings=shardings,
                time_limit_s=20)


def test_without_a_cap_every_run_rents() -> None:
    free = _plan(Constraints())
    assert free.buy == [] and {a.kind for a in free.assignments} == {"cloud"}
    assert free.team_spend == []


def test_a_monthly_cap_on_one_team_moves_its_runs_to_a_bought_machine() -> None:
    free = _plan(Constraints())
    per_month = sum(a.cost_usd for a in free.assignments if a.job == "vision-ft" and a.month == 0)
    assert per_month > 40  # four rented runs
    capped = _plan(Constraints(team_budgets={"vision": 20.0}))
    assert capped.total_cost_usd is not None and capped.buy, capped.budget_notes
    vision = [s for s in capped.team_spend if s.team == "vision"]
    assert len(vision) == 3 and all(s.within and s.spend_usd <= 20.0 for s in vision)
    assert any(a.job == "vision-ft" and a.kind == "local" for a in capped.assignments)
    # The other team is not capped, and its runs stay on the cheapest rental.
    nlp = [a for a in capped.assignments if a.job == "nlp-ft"]
    assert sum(a.runs for a in nlp) == 12
    assert capped.total_cost_usd >= free.total_cost_usd  # type: ignore[operator]


def test_a_cap_no_option_meets_is_said_not_hidden() -> None:
    tight = _plan(Constraints(team_budgets={"vision": 5.0}, include_local=False), builds=[])
    assert tight.total_cost_usd is None
    assert tight.budget_notes and "vision" in tight.budget_notes[0] and "cannot keep to $5.00" in tight.budget_notes[0]
