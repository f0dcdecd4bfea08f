"""Solving the portfolio model to a proven gap, fast.

The hard part of the model is its run counts: thousands of integer u[j][k][m] tied to the
purchases y[k][m] through capacity. With the runs made continuous (``integer_runs=False``) only the
purchases stay integer and HiGHS solves the model in a few seconds; its optimum Z_relax is a lower
bound on the integer optimum Z*. Rounding each run count down, with the runs taken off a build sent
to the job's cheapest rental (capacity only loosens, so the purchases stay feasible), gives an
integer plan of cost Z_round >= Z*. So

    (Z_round - Z_relax_bound) / Z_round <= gap_rel   proves the rounded plan optimal within gap_rel.

Where the proof fails (a job with no rental, provider quotas, or a rounding that costs too much), the
integer model is solved as written, warm-started from the rounded plan when there is one, with the
same stated gap. The answer says which way it went and how the time was spent.

Either model is handed to HiGHS as its LP relaxation first (``solve(relaxation_first=True)``):
most plans' relaxations are already whole (nothing bought, or whole machines), and then that is
the integer optimum for a seventh of what a MIP solve costs (2-3 against 18-24 ms); otherwise
the search runs as it would have without the attempt.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from optimizer.ilp.portfolio import PortfolioBuild, PortfolioJob, PortfolioModel, build_portfolio, capacity_hours
from optimizer.ilp.solve import OPTIMAL, SolveResult, solve

# Plans are optimal within 0.5 % of the best possible cost (a proven bound, not an estimate). On
# bench/solve_scaling.py's 100 jobs x 12 months the rounded plan is 0.11 % above the relaxation's
# bound in ~4 s, while the integer program as written was still 0.45 % from its own bound at 60 s.
PLAN_GAP_REL = 5e-3

# The model with relaxed runs is solved without two of HiGHS's primal heuristics: the root
# reduced-cost one (a sub-MIP fixing columns by their reduced costs) and feasibility jump. The LP
# relaxation settles most plans before either would run; most of the rest are all-local comparisons,
# where the two cost more than they found. Both off against both on, in turn, no solution differed:
# on bench/load.py-like plans, 5.4 against 7.2 s over 273 solves (100 plans; median 16.3 against
# 19.5 ms) and 3.8 against 5.1 s over 174 (65 other plans); on plans of 10, 30 and 60 jobs with
# 10-120 runs a month, solving took 0.43, 0.73 and 23 s against 0.63, 1.27 and 31 s. The integer
# program keeps HiGHS's settings: without the first heuristic its two solves among those 174 found
# other plans (within the gap), one in 587 ms instead of 263.
RELAXED_RUNS_OPTIONS: Mapping[str, Any] = MappingProxyType({
    "mip_heuristic_run_root_reduced_cost": False, "mip_heuristic_run_feasibility_jump": False,
})


@dataclass(frozen=True, slots=True)
class PortfolioSolve:
    model: PortfolioModel
    result: SolveResult
    build_s: float
    solve_s: float
    method: str  # "relaxed runs, rounded (gap proven)" | "integer program"


def solve_portfolio(
    jobs: Sequence[PortfolioJob],
    builds: Sequence[PortfolioBuild],
    months: int,
    *,
    hours_per_month: float,
    availability: float,
    capex_budget_usd: float | None = None,
    quotas_gpu_hours: Mapping[str, float] | None = None,
    time_limit_s: float = 30.0,
    gap_rel: float = PLAN_GAP_REL,
    team_budgets: Mapping[str, float] | None = None,
    quota_caps: Mapping[str, float] | None = None,
) -> PortfolioSolve:
    kw = {
        "hours_per_month": hours_per_month, "availability": availability,
        "capex_budget_usd": capex_budget_usd, "quotas_gpu_hours": quotas_gpu_hours,
        "team_budgets": team_budgets, "quota_caps": quota_caps,
    }
    start = time.perf_counter()
    build_s = solve_s = 0.0
    start_values: dict[str, float] | None = None
    # Team budgets: rounding runs down sends them to rentals, which may break a team's cap, so
    # those plans are solved as the integer program they are.
    if not quotas_gpu_hours and not quota_caps and not team_budgets and any(j.builds for j in jobs):
        t = time.perf_counter()
        relaxed = build_portfolio(jobs, builds, months, integer_runs=False, link_rows=False, **kw)  # type: ignore[arg-type]
        build_s += time.perf_counter() - t
        res = solve(relaxed.problem, time_limit_s, gap_rel=gap_rel / 4, relaxation_first=True,
                    highs_options=RELAXED_RUNS_OPTIONS)
        solve_s += res.seconds
        if res.has_solution and res.objective is not None:
            rounded = _round_down(relaxed, jobs, builds, res.values, hours_per_month * availability)
            if rounded is not None:
                bound = res.objective - (res.gap or 0.0) * abs(res.objective)
                cost = _objective(relaxed, rounded)
                gap = max(0.0, cost - bound) / max(abs(cost), 1e-9)
                if gap <= gap_rel:
                    proven = dataclasses.replace(
                        res, status=OPTIMAL, objective=cost, gap=gap, gap_rel=gap_rel, values=rounded,
                        seconds=solve_s,
                    )
                    return PortfolioSolve(relaxed, proven, build_s, solve_s, "relaxed runs, rounded (gap proven)")
                start_values = rounded
        elif res.status.startswith("Infeasible"):
            # Continuous runs only widen the model: the integer one is infeasible too.
            return PortfolioSolve(relaxed, res, build_s, solve_s, "relaxed runs (infeasible)")
    t = time.perf_counter()
    mdl = build_portfolio(jobs, builds, months, **kw)  # type: ignore[arg-type]
    build_s += time.perf_counter() - t
    left = max(1.0, time_limit_s - (time.perf_counter() - start))
    res = solve(mdl.problem, left, gap_rel=gap_rel, warm_start=start_values, relaxation_first=True)
    solve_s += res.seconds
    return PortfolioSolve(mdl, res, build_s, solve_s, "integer program")


def _round_down(
    mdl: PortfolioModel,
    jobs: Sequence[PortfolioJob],
    builds: Sequence[PortfolioBuild],
    values: Mapping[str, float],
    hours_cap: float,
) -> dict[str, float] | None:
    """Whole runs from a relaxed solution: each u rounded down, the rest rented; hours left on bought
    machines then take whole runs, most saving per hour first; a job with no rental gets its
    missing runs on builds with hours to spare. None if that cannot be done."""
    out: dict[str, float] = {}
    for v in mdl.y.values():
        out[v.name] = float(round(values.get(v.name, 0.0)))
    for v in mdl.n.values():
        out[v.name] = float(round(values.get(v.name, 0.0)))
    load: dict[tuple[int, int], float] = {}
    per_job: dict[tuple[int, int], int] = {}
    hours = {(j, b.build): b.hours for j, job in enumerate(jobs) for b in job.builds}
    kid = {b.id: k for k, b in enumerate(builds)}
    for (j, k, m), v in mdl.u.items():
        n = math.floor(values.get(v.name, 0.0) + 1e-6)
        out[v.name] = float(n)
        load[(k, m)] = load.get((k, m), 0.0) + n * hours[(j, builds[k].id)]
        per_job[(j, m)] = per_job.get((j, m), 0) + n
    # Hours the rounding freed on bought machines go to the runs that save the most per hour.
    coef = {var.name: c for var, c in mdl.problem.objective.items()}
    by_km: dict[tuple[int, int], list[tuple[float, int, str, float]]] = {}
    for (j, k, m), v in mdl.u.items():
        h = hours[(j, builds[k].id)]
        if j in mdl.implicit and coef.get(v.name, 0.0) < 0 and h > 0:
            by_km.setdefault((k, m), []).append((coef[v.name] / h, j, v.name, h))
    for (k, m), rows in by_km.items():
        b = builds[k]
        spare = capacity_hours(b, lambda mp, k=k: out[mdl.y[(k, mp)].name], m, hours_cap) - load.get((k, m), 0.0)
        for _, j, name, h in sorted(rows):
            room = mdl.demand[(j, m)] - per_job.get((j, m), 0)
            add = min(room, int((spare + 1e-9) // h))
            if add > 0:
                out[name] += add
                per_job[(j, m)] = per_job.get((j, m), 0) + add
                spare -= add * h
                load[(k, m)] = load.get((k, m), 0.0) + add * h
    for (j, m), r in mdl.demand.items():
        if j in mdl.implicit:
            continue
        missing = r - per_job.get((j, m), 0) - sum(
            int(out[v.name]) for (jj, _o, mm), v in mdl.n.items() if jj == j and mm == m
        )
        if missing <= 0:
            continue
        # Cheapest energy first, on builds with hours left this month.
        for use in sorted(jobs[j].builds, key=lambda x: x.energy_per_run_usd):
            k = kid[use.build]
            var = mdl.u.get((j, k, m))
            if var is None:
                continue
            b = builds[k]
            spare = capacity_hours(b, lambda mp, k=k: out[mdl.y[(k, mp)].name], m, hours_cap) - load.get((k, m), 0.0)
            fit = min(missing, int((spare + 1e-9) // use.hours) if use.hours > 0 else missing)
            if fit > 0 and out[var.name] + fit <= r:
                out[var.name] += fit
                load[(k, m)] = load.get((k, m), 0.0) + fit * use.hours
                missing -= fit
            if missing == 0:
                break
        if missing > 0:
            return None
    return out


def _objective(mdl: PortfolioModel, values: Mapping[str, float]) -> float:
    obj = mdl.problem.objective
    return float(obj.constant + sum(coef * values.get(var.name, 0.0) for var, coef in obj.items()))
