"""The portfolio's two stages and the HiGHS options each is given: the model with relaxed runs is
solved without the root reduced-cost heuristic and feasibility jump
(``portfolio_solve.RELAXED_RUNS_OPTIONS``), the integer program as written with HiGHS's own
settings, and every option named is one HiGHS knows (an unknown name would be refused by HiGHS and
silently change nothing)."""

from __future__ import annotations

from typing import Any

import highspy
import pytest

from optimizer.ilp import portfolio_solve
from optimizer.ilp.portfolio import BuildUse, PortfolioBuild, PortfolioJob
from optimizer.ilp.solve import OPTIMAL, SolveResult

# One job with no rental and two machines: 3 runs a month of 250 h (on b) or 400 h (on a) need more
# than a unit's 584 h (730 h x 0.8), and half of that in the month it arrives. The LP relaxation buys
# 2.57 units of b, so the search for whole machines has work to do (it buys one a and two b).
BUILDS = [
    PortfolioBuild(id="a", price_usd=3000.0, net_cost_by_month=[2000.0, 1900.0, 1800.0], first_month_share=0.5),
    PortfolioBuild(id="b", price_usd=5000.0, net_cost_by_month=[3200.0, 3000.0, 2800.0], first_month_share=0.5),
]
JOBS = [PortfolioJob(name="j", demand=[3, 3, 3], rentals=[],
                     builds=[BuildUse(build="a", hours=400.0, energy_per_run_usd=12.0),
                             BuildUse(build="b", hours=250.0, energy_per_run_usd=9.0)])]


def test_every_option_handed_to_highs_is_one_it_knows() -> None:
    h = highspy.Highs()
    for name, value in portfolio_solve.RELAXED_RUNS_OPTIONS.items():
        status, current = h.getOptionValue(name)
        assert status == highspy.HighsStatus.kOk, name
        assert type(current) is type(value), name


def test_the_relaxed_stage_drops_two_heuristics_and_the_integer_program_keeps_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[dict[str, Any]] = []
    real = portfolio_solve.solve

    def recording(problem: Any, *args: Any, **kw: Any) -> SolveResult:
        seen.append({"integer_runs": any(v.cat == "Integer" and v.name.startswith("u_") for v in problem.variables()),
                     "highs_options": kw.get("highs_options")})
        return real(problem, *args, **kw)

    monkeypatch.setattr(portfolio_solve, "solve", recording)
    # Rounding cannot place whole runs here (no rental takes the rest), so both stages run.
    monkeypatch.setattr(portfolio_solve, "_round_down", lambda *a, **k: None)
    out = portfolio_solve.solve_portfolio(JOBS, BUILDS, 3, hours_per_month=730.0, availability=0.8)
    assert out.result.status == OPTIMAL and out.method == "integer program"
    assert seen == [
        {"integer_runs": False, "highs_options": portfolio_solve.RELAXED_RUNS_OPTIONS},
        {"integer_runs": True, "highs_options": None},
    ]
    assert dict(portfolio_solve.RELAXED_RUNS_OPTIONS) == {
        "mip_heuristic_run_root_reduced_cost": False, "mip_heuristic_run_feasibility_jump": False}


def test_a_relaxed_solve_with_the_options_finds_what_it_finds_without() -> None:
    """Switching the heuristics off changes how HiGHS searches, not the proven optimum."""
    from optimizer.ilp.portfolio import build_portfolio
    from optimizer.ilp.solve import solve

    got = []
    for options in (None, portfolio_solve.RELAXED_RUNS_OPTIONS):
        mdl = build_portfolio(JOBS, BUILDS, 3, hours_per_month=730.0, availability=0.8, integer_runs=False,
                              link_rows=False)
        res = solve(mdl.problem, 30, gap_rel=0.0, relaxation_first=True, highs_options=options)
        assert res.status == OPTIMAL
        got.append(res.objective)
    assert got[0] == pytest.approx(got[1], rel=1e-9)
    assert got[0] > 0
