"""The integer programs against exhaustive enumeration on random small instances.

For the single-job quote: random catalogs of offers and builds, random deadline and budget; the
ILP's pick costs exactly the minimum over every (offer, nodes, sharding, pricing) and every
(build, units, sharding), and respects every constraint. For the portfolio: random jobs, months,
rentals and builds; the ILP objective equals the brute-force optimum over all purchase schedules
and run assignments, and its solution satisfies demand, capacity, capex and quota.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pulp
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from optimizer.candidates import Candidate
from optimizer.ilp.portfolio import BuildUse, PortfolioBuild, PortfolioJob, RentalChoice, build_portfolio
from optimizer.ilp.single import build_single
from optimizer.ilp.solve import solve
from optimizer.quote import quote
from optimizer.estimator.workload import Constraints
from tests.unit.decide_fakes import WORKLOAD, FakeEstimator, brute_force_single, build, offer, shardings

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GPUS = ["A10G", "A100", "A100-80GB", "H100", "T4", "L4"]
LOCAL_GPUS = ["RTX4090", "RTX3090"]


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[list, list, float | None, float | None, bool, int, float]:  # type: ignore[type-arg]
    offers = []
    for i in range(draw(st.integers(1, 6))):
        gpu = draw(st.sampled_from(GPUS))
        count = draw(st.sampled_from([1, 2, 4, 8]))
        price = draw(st.floats(0.2, 40.0)) * count
        spot = draw(st.one_of(st.none(), st.floats(0.05, 1.0).map(lambda f, p=price: f * p)))
        offers.append(offer(
            f"i{i}", gpu, count, price, spot=spot, provider=draw(st.sampled_from(["aws", "gcp", "lambda"])),
            ram_gb=draw(st.sampled_from([8, 16, 64, 512])) * count, vcpus=draw(st.sampled_from([2, 4, 32])) * count,
            increment_s=draw(st.sampled_from([1, 60, 3600])), min_s=draw(st.sampled_from([0, 60, 600])),
        ))
    builds = [
        build(f"b{i}", draw(st.sampled_from(LOCAL_GPUS)), draw(st.floats(800, 6000)),
              count=draw(st.sampled_from([1, 2])), ram_gb=draw(st.sampled_from([16, 32, 64])),
              lead_days=draw(st.sampled_from([0, 3, 7])), resale=draw(st.floats(0, 0.6)))
        for i in range(draw(st.integers(0, 3)))
    ]
    deadline = draw(st.one_of(st.none(), st.floats(0.5, 400)))
    budget = draw(st.one_of(st.none(), st.floats(1, 5000)))
    spot = draw(st.booleans())
    runs = draw(st.sampled_from([1, 3, 20, 200]))
    mem = draw(st.sampled_from([10.0, 20.0, 30.0, 60.0]))
    return offers, builds, deadline, budget, spot, runs, mem


@FUZZ
@given(catalogs())
def test_quote_equals_brute_force(case: tuple) -> None:  # type: ignore[type-arg]
    offers, builds, deadline, budget, spot, runs, mem = case
    est = FakeEstimator(mem_gb=mem)
    # Random catalogs are full of prices far from their provider's level; the screen that rejects
    # those has its own tests (tests/unit/test_price_screen.py). Here: the solver against every choice.
    c = Constraints(deadline_hours=deadline, budget_usd=budget, allow_spot=spot, allow_suspect_prices=True)
    q = quote(WORKLOAD, c, offers, builds, runs=runs, prices_as_of={}, snapshot_id="fuzz", estimator=est,
              shardings=shardings)
    every = brute_force_single(WORKLOAD, offers, builds, est, runs=runs, deadline=deadline, budget=budget,
                               allow_spot=spot)
    event("feasible" if every else "infeasible")
    if not every:
        assert q.best is None and q.rejected
        return
    assert q.best is not None, q.rejected
    assert q.best.cost_usd == pytest.approx(min(ch.cost_usd for ch in every), abs=2e-3)
    assert q.best.memory_need_gb_per_gpu <= q.best.vram_gb_per_gpu * 2**30 / 1e9
    if budget is not None:
        assert q.best.cost_usd <= budget + 1e-3
    if deadline is not None:
        lead = q.best.cost_breakdown.get("lead_time_hours", 0.0)
        assert q.best.hours + lead <= deadline + 1e-3


def _cand(i: int, cost: float, hours: float, gpus: int, provider: str) -> Candidate:
    return Candidate(
        key=f"c{i}", kind="cloud", provider=provider, region="r", zone=None, instance_type=f"c{i}", gpu="A100",
        gpus_per_node=gpus, nodes=1, pricing="on_demand", hourly_usd=cost / hours, hours=hours, fixed_usd=0.0,
        cost_per_run_usd=cost, runs=1, memory_need_gb_per_gpu=1, vram_gb_per_gpu=40, sharding="ddp",
        breakdown={}, total_gpus=gpus,
    )


@FUZZ
@given(
    st.lists(st.tuples(st.integers(1, 100), st.integers(1, 50), st.sampled_from([1, 2, 4, 8]),
                       st.sampled_from(["aws", "gcp"])), min_size=1, max_size=12),
    st.one_of(st.none(), st.integers(1, 50)),
    st.one_of(st.none(), st.integers(1, 100)),
    st.one_of(st.none(), st.integers(1, 8)),
)
def test_single_model_equals_brute_force(rows: list, deadline: int | None, budget: int | None,  # type: ignore[type-arg]
                                         quota: int | None) -> None:
    cands = [_cand(i, *r) for i, r in enumerate(rows)]
    quotas = {"aws": quota} if quota is not None else None
    ok = [c for c in cands if (deadline is None or c.hours <= deadline) and (budget is None or c.cost_usd <= budget)
          and (quota is None or c.provider != "aws" or c.total_gpus <= quota)]
    model = build_single(cands, deadline_hours=deadline, budget_usd=budget, quotas=quotas)
    res = solve(model.problem, 10)
    assert all(name for name in model.problem.constraints)  # every constraint is named
    if not ok:
        assert res.status == "Infeasible"
        return
    picked = model.picked(res.values)
    assert res.status == "Optimal" and picked is not None
    assert picked.cost_usd == min(c.cost_usd for c in ok)
    assert picked in ok


# ---- portfolio -------------------------------------------------------------------------------

H, A = 10.0, 1.0  # a 10-hour month keeps capacity binding on tiny instances
YMAX = 3


@st.composite
def portfolios(draw: st.DrawFn) -> tuple[list[PortfolioJob], list[PortfolioBuild], int, float | None, float | None]:
    months = draw(st.integers(1, 2))
    nb = draw(st.integers(0, 2))
    builds = [
        PortfolioBuild(
            id=f"k{k}", price_usd=float(draw(st.integers(5, 60))),
            net_cost_by_month=[float(draw(st.integers(1, 40))) for _ in range(months)],
            first_month_share=draw(st.sampled_from([1.0, 0.5, 0.0])),
        )
        for k in range(nb)
    ]
    jobs = []
    for j in range(draw(st.integers(1, 2))):
        rentals = [
            RentalChoice(key=f"r{j}{o}", provider=draw(st.sampled_from(["aws", "gcp"])),
                         cost_per_run_usd=float(draw(st.integers(1, 30))), hours=float(draw(st.integers(1, 4))),
                         gpus=float(draw(st.sampled_from([1, 2]))))
            for o in range(draw(st.integers(0, 2)))
        ]
        uses = [
            BuildUse(build=b.id, hours=float(draw(st.integers(1, 6))), energy_per_run_usd=float(draw(st.integers(0, 3))))
            for b in builds if draw(st.booleans())
        ]
        demand = [draw(st.integers(0, 2)) for _ in range(months)]
        jobs.append(PortfolioJob(name=f"j{j}", demand=demand, rentals=rentals, builds=uses))
    capex = draw(st.one_of(st.none(), st.integers(0, 120).map(float)))
    quota = draw(st.one_of(st.none(), st.integers(0, 2).map(float)))
    return jobs, builds, months, capex, quota


def _allocations(runs: int, n: int) -> list[tuple[int, ...]]:
    return [a for a in itertools.product(range(runs + 1), repeat=n) if sum(a) == runs]


def _brute_portfolio(
    jobs: Sequence[PortfolioJob], builds: Sequence[PortfolioBuild], months: int, capex: float | None,
    quota: float | None,
) -> float | None:
    kidx = {b.id: k for k, b in enumerate(builds)}
    best: float | None = None
    for ys in itertools.product(range(YMAX + 1), repeat=len(builds) * months):
        y = {(k, m): ys[k * months + m] for k in range(len(builds)) for m in range(months)}
        if capex is not None and sum(builds[k].price_usd * n for (k, _), n in y.items()) > capex + 1e-9:
            continue
        total = sum(builds[k].net_cost_by_month[m] * n for (k, m), n in y.items())
        for m in range(months):
            cap = {
                k: H * A * (sum(y[(k, mp)] for mp in range(m)) + builds[k].first_month_share * y[(k, m)])
                for k in range(len(builds))
            }
            per_job = []
            for job in jobs:
                opts = [("r", o) for o in range(len(job.rentals))] + [("b", u) for u in job.builds]
                per_job.append([(opts, a) for a in _allocations(job.demand[m], len(opts))] if job.demand[m] else
                               [(opts, tuple(0 for _ in opts))])
            month_best: float | None = None
            for combo in itertools.product(*per_job):
                load = {k: 0.0 for k in cap}
                quota_use = 0.0
                cost = 0.0
                for job, (opts, alloc) in zip(jobs, combo):
                    for (kind, o), n in zip(opts, alloc):
                        if kind == "r":
                            r = job.rentals[o]  # type: ignore[index]
                            cost += r.cost_per_run_usd * n
                            if r.provider == "aws":
                                quota_use += r.gpus * r.hours * n
                        else:
                            load[kidx[o.build]] += o.hours * n  # type: ignore[union-attr]
                            cost += o.energy_per_run_usd * n  # type: ignore[union-attr]
                if any(load[k] > cap[k] + 1e-9 for k in cap):
                    continue
                if quota is not None and quota_use > quota * H + 1e-9:
                    continue
                month_best = cost if month_best is None else min(month_best, cost)
            if month_best is None:
                total = float("inf")
                break
            total += month_best
        if total != float("inf"):
            best = total if best is None else min(best, total)
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(portfolios())
def test_portfolio_equals_brute_force(case: tuple) -> None:  # type: ignore[type-arg]
    jobs, builds, months, capex, quota = case
    # The enumeration tries up to YMAX units per build and month; bound the model the same way so
    # both solve the same problem.
    mdl = build_portfolio(jobs, builds, months, hours_per_month=H, availability=A, capex_budget_usd=capex,
                          quotas_gpu_hours={"aws": quota} if quota is not None else None)
    for v in mdl.y.values():
        v.upBound = YMAX
    res = solve(mdl.problem, 20)
    want = _brute_portfolio(jobs, builds, months, capex, quota)
    event("infeasible" if want is None else ("buys" if any(res.integer(v.name) for v in mdl.y.values()) else "rents"))
    if want is None:
        assert res.status == "Infeasible"
        return
    assert res.status == "Optimal"
    assert res.objective == pytest.approx(want, abs=1e-6)
    # The solution itself satisfies every constraint.
    val = {name: res.integer(name) for name in res.values}
    for c in mdl.problem.constraints.values():
        lhs = sum(coef * val.get(var.name, 0) for var, coef in c.items())
        rhs = -c.constant
        if c.sense == pulp.LpConstraintEQ:
            assert abs(lhs - rhs) < 1e-6
        elif c.sense == pulp.LpConstraintLE:
            assert lhs <= rhs + 1e-6
        else:
            assert lhs >= rhs - 1e-6
