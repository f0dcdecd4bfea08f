"""Plans solve each portfolio model's LP relaxation first and stop there when it is already
whole (``solve(relaxation_first=True)``). That must not change a plan: the same purchases,
commitments, assignments, costs, comparisons and proven gaps as the integer search alone, on plans
that buy nothing, buy machines, commit instances and cap capital (the bundled catalog)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from optimizer.estimator.workload import Constraints, Workload
from optimizer.plan import PlanJobInput, plan
from tests.unit.plan_workloads import bundled
from tests.unit.test_solve import _solver_spy

portfolio_solve = importlib.import_module("optimizer.ilp.portfolio_solve")


def _job(name: str, model: str, method: str, tokens: float, runs: float) -> PlanJobInput:
    return PlanJobInput(name=name, workload=Workload(model=model, method=method, tokens=tokens), runs_per_month=runs)


PLANS: list[tuple[list[PlanJobInput], int, Constraints, dict[str, Any]]] = [
    # Light jobs: nothing is worth buying.
    ([_job("a", "qwen2.5-1.5b", "lora", 1e8, 2), _job("b", "bert-base", "full", 1e8, 4)], 12, Constraints(), {}),
    # Busy A100 work on AWS: an instance committed for a term.
    ([_job("a", "llama-3-8b", "full", 3e9, 10)], 12,
     Constraints(providers=["aws"], gpus=["A100"], max_gpus=8, include_local=False), {}),
    # Busy small jobs over two and three years: machines bought, where the relaxation is fractional.
    ([_job(f"j{i}", m, "qlora", 2e9, 12) for i, m in enumerate(["llama-3-8b", "mistral-7b", "qwen2.5-1.5b", "gpt2"])],
     24, Constraints(), {}),
    ([_job("a", "qwen2.5-0.5b", "full", 5e9, 20), _job("b", "llama-3-8b", "qlora", 1e9, 15)], 36, Constraints(), {}),
    ([_job("a", "llama-3-8b", "lora", 1e10, 8)], 24, Constraints(), {"capex_budget_usd": 4000.0}),
]


def _answer(jobs: list[PlanJobInput], months: int, constraints: Constraints, kw: dict[str, Any]) -> dict[str, Any]:
    offers, builds = bundled()
    out = plan(jobs, months, constraints, offers, builds, prices_as_of={}, snapshot_id="t", **kw).model_dump()
    out.pop("timing")
    out["solver"].pop("seconds")
    out["solver"].pop("time_limit_s")  # what was left of the plan's time when its last model was solved
    return out


@pytest.mark.parametrize("i", range(len(PLANS)))
def test_relaxation_first_leaves_plans_as_they_were(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs, months, constraints, kw = PLANS[i]
    fast = _answer(jobs, months, constraints, kw)
    real = portfolio_solve.solve
    monkeypatch.setattr(portfolio_solve, "solve", lambda *a, **k: real(*a, **{**k, "relaxation_first": False}))
    assert _answer(jobs, months, constraints, kw) == fast


def test_the_plans_cover_buying_committing_and_both_ways_of_solving(monkeypatch: pytest.MonkeyPatch) -> None:
    made = _solver_spy(monkeypatch)
    answers = [_answer(*p) for p in PLANS]
    whole = [m.relaxation_integral for m in made]
    assert whole.count(True) >= 3 and whole.count(False) >= 3  # stopped at the relaxation, and searched
    # The comparison above is only worth something if some plans buy machines and some commit.
    assert any(sum(b["count"] for b in a["buy"]) > 0 for a in answers)
    assert any(a["commit"] for a in answers)
    assert any(not a["buy"] and not a["commit"] for a in answers)
