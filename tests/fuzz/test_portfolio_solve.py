"""``solve_portfolio`` (relaxed runs rounded with a proven gap, else the integer program) against
exhaustive enumeration on random small portfolios: its cost is within the stated gap of the true
optimum, never below it, and its plan meets every constraint of the integer model."""

from __future__ import annotations

import pulp
import pytest
from hypothesis import HealthCheck, given, settings

from optimizer.ilp.portfolio import build_portfolio
from optimizer.ilp.portfolio_solve import PLAN_GAP_REL, solve_portfolio
from tests.fuzz.test_ilp_bruteforce import A, H, _brute_portfolio, portfolios


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(portfolios())
def test_solve_portfolio_is_optimal_within_its_gap(case: tuple) -> None:  # type: ignore[type-arg]
    jobs, builds, months, capex, quota = case
    quotas = {"aws": quota} if quota is not None else None
    out = solve_portfolio(jobs, builds, months, hours_per_month=H, availability=A, capex_budget_usd=capex,
                          quotas_gpu_hours=quotas, time_limit_s=20)
    want = _brute_portfolio(jobs, builds, months, capex, quota)
    if want is None:
        assert not out.result.has_solution
        return
    assert out.result.status == "Optimal"
    got = out.result.objective
    assert got is not None
    assert want - 1e-6 <= got <= want + PLAN_GAP_REL * max(abs(want), 1.0) + 1e-6
    # The plan, read with whole runs, satisfies the integer model's every constraint.
    full = build_portfolio(jobs, builds, months, hours_per_month=H, availability=A, capex_budget_usd=capex,
                           quotas_gpu_hours=quotas)
    val = {name: round(v) for name, v in out.result.values.items()}
    assert all(abs(v - round(v)) < 1e-9 for v in out.result.values.values())
    for c in full.problem.constraints.values():
        lhs = sum(coef * val.get(var.name, 0) for var, coef in c.items())
        rhs = -c.constant
        if c.sense == pulp.LpConstraintEQ:
            assert lhs == pytest.approx(rhs, abs=1e-6)
        elif c.sense == pulp.LpConstraintLE:
            assert lhs <= rhs + 1e-6
        else:
            assert lhs >= rhs - 1e-6
    # Runs per job and month add up to the demand, rentals included.
    rented = out.model.rental_runs(out.result.values)
    for (j, m), r in out.model.demand.items():
        on_builds = sum(val.get(v.name, 0) for (jj, _k, mm), v in out.model.u.items() if jj == j and mm == m)
        on_rent = sum(n for (jj, _o, mm), n in rented.items() if jj == j and mm == m)
        assert on_builds + on_rent == r
