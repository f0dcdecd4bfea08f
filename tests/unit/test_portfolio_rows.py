"""``build_portfolio`` writes its objective and its demand, capacity and link rows as coefficient
lists. They must be the very expressions PuLP's own arithmetic makes from the model's formulas
(``c * v``, ``lpSum``, ``<=``): the same terms in the same order, the same coefficients to the last
bit, a zero coefficient left out as ``0 * v`` leaves it out. The reference below writes the formulas
of ``optimizer.ilp.portfolio``'s docstring with those operators; random portfolios (machines,
commitments, zero and fractional hours, prices and first-month shares) are built both ways."""

from __future__ import annotations

import random
from typing import Any

import pulp
import pytest

from optimizer.ilp.portfolio import BuildUse, PortfolioBuild, PortfolioJob, RentalChoice, build_portfolio

ROWS = ("demand_", "capacity_", "link_")


def _reference(jobs: list[PortfolioJob], builds: list[PortfolioBuild], months: int, H: float, A: float,
               link_rows: bool, mdl: Any) -> tuple[pulp.LpAffineExpression, dict[str, pulp.LpConstraint]]:
    """The objective and rows written with PuLP's operators, on the model's own variables."""
    kidx = {b.id: k for k, b in enumerate(builds)}
    # Added one by one as the builder does: from Python 3.12 ``sum`` compensates its rounding.
    constant = 0.0
    for (j, _m), r in mdl.demand.items():
        if (o := mdl.implicit.get(j)) is not None:
            constant += jobs[j].rentals[o].cost_per_run_usd * r
    energy = {(j, kidx[x.build]): x for j, job in enumerate(jobs) for x in job.builds}

    def run_cost(j: int, k: int) -> float:
        o = mdl.implicit.get(j)
        e = energy[(j, k)].energy_per_run_usd
        return e - jobs[j].rentals[o].cost_per_run_usd if o is not None else e

    objective = (pulp.lpSum(jobs[j].rentals[o].cost_per_run_usd * v for (j, o, _m), v in mdl.n.items())
                 + pulp.lpSum(run_cost(j, k) * v for (j, k, _m), v in mdl.u.items())
                 + pulp.lpSum(builds[k].net_cost_by_month[m] * v for (k, m), v in mdl.y.items()) + constant)
    rows: dict[str, pulp.LpConstraint] = {}
    for (j, m), r in mdl.demand.items():
        terms = [v for (jj, _o, mm), v in mdl.n.items() if (jj, mm) == (j, m)]
        terms += [v for (jj, _k, mm), v in mdl.u.items() if (jj, mm) == (j, m)]
        if j in mdl.implicit:
            if terms:
                rows[f"demand_{j}_{m}"] = pulp.lpSum(terms) <= r
        else:
            rows[f"demand_{j}_{m}"] = pulp.lpSum(terms) == r
    ks = sorted({k for (k, _m) in mdl.y})
    for k in ks:
        b = builds[k]
        for m in range(months):
            load = [energy[(j, k)].hours * v for (j, kk, mm), v in mdl.u.items() if (kk, mm) == (k, m)]
            if not load:
                continue
            if b.term_months is None and b.unit_hours is None:
                owned = pulp.lpSum(mdl.y[(k, mp)] for mp in range(m)) + b.first_month_share * mdl.y[(k, m)]
                rows[f"capacity_{k}_{m}"] = pulp.lpSum(load) <= H * A * owned
            else:
                hours = H * A if b.unit_hours is None else b.unit_hours
                terms = [b.share(mp, m) * mdl.y[(k, mp)] for mp in range(m + 1) if b.share(mp, m) > 0]
                rows[f"capacity_{k}_{m}"] = pulp.lpSum(load) <= hours * (pulp.lpSum(terms) if terms else 0)
    for (j, k, m), v in mdl.u.items() if link_rows else ():
        owned = pulp.lpSum(mdl.y[(k, mp)] for mp in range(m + 1) if builds[k].active(mp, m))
        rows[f"link_{j}_{k}_{m}"] = v <= jobs[j].demand[m] * owned
    return objective, rows


def _terms(e: Any) -> list[tuple[str, str, str]]:
    # repr: the same float to the last bit; the type: 1 stays the int PuLP makes of a bare variable.
    return [(v.name, repr(c), type(c).__name__) for v, c in e.items()]


def _case(rng: random.Random) -> tuple[list[PortfolioJob], list[PortfolioBuild], int, dict[str, Any]]:
    months = rng.randint(1, 13)
    builds = []
    for k in range(rng.randint(0, 4)):
        term = rng.choice([None, None, 1, 3, 12])
        builds.append(PortfolioBuild(
            id=f"b{k}", price_usd=rng.choice([0.0, 1500.0]),
            net_cost_by_month=[rng.choice([0.0, 100.0 * rng.random(), 1234.5]) for _ in range(months)],
            first_month_share=rng.choice([1.0, 0.5, 0.0, 0.3333333]), term_months=term,
            unit_hours=rng.choice([None, 730.0, 0.0]) if term else None))
    jobs = []
    for j in range(rng.randint(1, 6)):
        rentals = [RentalChoice(key=f"r{o}", provider="aws", cost_per_run_usd=rng.choice([0.0, 12.3 * rng.random(), 50.0]),
                                hours=3.7, gpus=1.0) for o in range(rng.randint(0, 3))]
        uses = [BuildUse(build=b.id, hours=rng.choice([0.0, 2.5, 700.0 * rng.random()]),
                         energy_per_run_usd=rng.choice([0.0, 1.1, 30.0 * rng.random()]))
                for b in builds if rng.random() < 0.7]
        jobs.append(PortfolioJob(name=f"j{j}", demand=[rng.choice([0, 1, 2, 5]) for _ in range(months)],
                                 rentals=rentals, builds=uses))
    kw = {"hours_per_month": rng.choice([730.0, 720.5, 0.0]), "availability": rng.choice([0.8, 1.0, 0.0]),
          "integer_runs": rng.random() < 0.5, "link_rows": rng.random() < 0.5,
          "quotas_gpu_hours": rng.choice([None, {"aws": 100.0}])}
    return jobs, builds, months, kw


@pytest.mark.parametrize("seed", range(4))
def test_rows_are_the_expressions_pulp_arithmetic_makes(seed: int) -> None:
    rng = random.Random(seed)
    compared = 0
    for _ in range(60):
        jobs, builds, months, kw = _case(rng)
        mdl = build_portfolio(jobs, builds, months, **kw)
        objective, rows = _reference(jobs, builds, months, kw["hours_per_month"], kw["availability"],
                                     kw["link_rows"], mdl)
        got = mdl.problem.objective
        assert (_terms(got), repr(got.constant)) == (_terms(objective), repr(objective.constant))
        built = {name: c for name, c in mdl.problem.constraints.items() if name.startswith(ROWS)}
        assert list(built) == list(rows)  # the same rows, in the same order
        for name, want in rows.items():
            c = built[name]
            assert (c.sense, repr(c.constant), _terms(c)) == (want.sense, repr(want.constant), _terms(want)), name
        compared += len(rows)
    assert compared > 500  # the cases do make rows of every kind
