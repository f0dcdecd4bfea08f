"""The portfolio model: a year of jobs, machines to buy and when, and where each run goes.

Sets and data (names as in the code)::

    J, M          jobs j and months m = 0 .. |M|-1
    O[j]          rental options of job j (already meeting its deadline), indexed o
    K             local builds k;  K[j] the builds job j can run on
    R[j][m]       runs of job j due in month m (integers)
    c[j][o]       cost of one run of j on rental o, USD;  g[j][o] its GPUs;  P(j, o) its provider
    h[j][o]       wall hours of one run of j on rental o
    t[j][k]       hours of one run of j on one unit of build k;  e[j][k] its energy cost, USD
    F[k][m]       price of a unit of k bought in month m minus its resale value at the horizon, USD
    Pk[k]         purchase price of a unit of k, USD
    phi[k]        share of its first month a new unit of k is usable (lead time to deliver and build)
    T[k]          for a commitment k (k instances reserved for a term): its term in months; a unit
                  started in m' serves months m' .. m'+T[k]-1 with all their hours, and F[k][m'] is
                  its charge (every hour of the term, or of the horizon's share of it)
    H, A          hours in a month, share of them a machine is available for jobs
    B             capex budget (USD);  Q[p] monthly GPU-hour quota of provider p

Variables::

    n[j][o][m] in Z+   runs of j on rental o in month m
    u[j][k][m] in Z+   runs of j on build k in month m
    y[k][m]    in Z+   units of build k bought in month m

Model::

    minimise   sum c[j][o] n[j][o][m] + sum e[j][k] u[j][k][m] + sum F[k][m] y[k][m]
    s.t.  demand_j_m:    sum_o n[j][o][m] + sum_k u[j][k][m] = R[j][m]
          capacity_k_m:  sum_j t[j][k] u[j][k][m]
                           <= H A (sum_{m' < m} y[k][m'] + phi[k] y[k][m])
                         (commitments: <= H sum_{m' <= m < m' + T[k]} y[k][m'])
          capex:         sum Pk[k] y[k][m] <= B
          quota_p_m:     sum_{(j, o): P(j, o) = p} g[j][o] h[j][o] n[j][o][m] <= Q[p] H
          acct_q_m:      sum_{(j, o)} d[j][o][q] h[j][o] n[j][o][m] <= L[q] H
                         (account quota q, ``quota_caps``: L[q] vCPUs or GPUs held at once, d[j][o][q]
                         what one run of j on o holds of it; optimizer.quotas)
          team_T_m:      sum_{j in T} (sum_o c[j][o] n[j][o][m] + sum_k e[j][k] u[j][k][m]) <= W[T]
                         (W[T]: team T's monthly budget, ``team_budgets``; purchases are shared capital)
          link_j_k_m:    u[j][k][m] <= R[j][m] sum_{m' <= m} y[k][m']      (valid inequality)
          bounds:        n[j][o][m], u[j][k][m] <= R[j][m]

Without quotas (Q empty) no variable is redundant: rentals have no limit, so only each job's
cheapest rental o*(j) can carry runs, at c*[j] = c[j][o*(j)], and it takes whatever the builds do
not, n[j][o*][m] = R[j][m] - sum_k u[j][k][m]. Those n are substituted out, and a build no cheaper
per run than c*[j] (e[j][k] >= c*[j]) is never worth a run of j, so its u[j][k][m] are left out::

    minimise   sum c*[j] R[j][m] + sum (e[j][k] - c*[j]) u[j][k][m] + sum F[k][m] y[k][m]
    s.t.  demand_j_m:    sum_k u[j][k][m] <= R[j][m]      (= R[j][m] where j has no rental)

``integer_runs=False`` makes u continuous (only y stays integer): a relaxation whose optimum is a
lower bound on the model's, which ``optimizer.plan`` rounds down to whole runs (the rest rented) to
get an integer plan and, with the bound, a proven gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulp


@dataclass(frozen=True, slots=True)
class RentalChoice:
    key: str
    provider: str
    cost_per_run_usd: float
    hours: float
    gpus: float
    # Account quotas this rental holds while it runs: (quota key, vCPUs or GPUs), optimizer.quotas.
    quota_draw: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class BuildUse:
    build: str
    hours: float  # per run on one unit
    energy_per_run_usd: float


@dataclass(frozen=True, slots=True)
class PortfolioJob:
    name: str
    demand: Sequence[int]  # R[j][m]
    rentals: Sequence[RentalChoice]
    builds: Sequence[BuildUse]
    team: str | None = None  # whose monthly budget its spend counts against (team_T_m rows)


@dataclass(frozen=True, slots=True)
class PortfolioBuild:
    id: str
    price_usd: float
    net_cost_by_month: Sequence[float]  # F[k][m]
    first_month_share: float = 1.0  # phi[k]
    # A commitment instead of a machine (optimizer.plan_commitments): a unit started in month m'
    # serves months m' .. m' + T[k] - 1 only, every hour of them (``unit_hours`` a month, not H A),
    # and F[k][m'] is what it is charged, used or not. None: a machine, owned to the horizon.
    term_months: int | None = None
    unit_hours: float | None = None

    def share(self, bought: int, month: int) -> float:
        """w[k][m'][m]: the share of month ``month`` a unit bought in ``bought`` can work."""
        if self.term_months is not None:
            return 1.0 if bought <= month < bought + self.term_months else 0.0
        return 1.0 if bought < month else self.first_month_share if bought == month else 0.0

    def active(self, bought: int, month: int) -> bool:
        """Whether a unit bought in ``bought`` is held in ``month`` (the link rows' test)."""
        if self.term_months is not None:
            return bought <= month < bought + self.term_months
        return bought <= month


def capacity_hours(b: PortfolioBuild, units_bought: Callable[[int], Any], month: int, machine_hours: float) -> Any:
    """Hours units of ``b`` can work in ``month``: sum_m' w[k][m'][m] y[k][m'] x (H A, or unit_hours).
    ``units_bought(m')`` gives y[k][m'] (a variable or a number)."""
    hours = machine_hours if b.unit_hours is None else b.unit_hours
    terms = [b.share(mp, month) * units_bought(mp) for mp in range(month + 1) if b.share(mp, month) > 0]
    return hours * (pulp.lpSum(terms) if terms and not isinstance(terms[0], (int, float)) else sum(terms))


@dataclass(slots=True)
class PortfolioModel:
    problem: pulp.LpProblem
    n: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    u: dict[tuple[int, int, int], pulp.LpVariable] = field(default_factory=dict)
    y: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    # Jobs whose rental runs were substituted out: job -> index of its cheapest rental o*(j).
    implicit: dict[int, int] = field(default_factory=dict)
    demand: dict[tuple[int, int], int] = field(default_factory=dict)

    def rental_runs(self, values: Mapping[str, float]) -> dict[tuple[int, int, int], int]:
        """Runs per (job, rental, month) of a solution, the substituted ones included."""
        out: dict[tuple[int, int, int], int] = {}
        for key, v in self.n.items():
            n = int(round(values.get(v.name, 0.0)))
            if n > 0:
                out[key] = n
        if self.implicit:
            local: dict[tuple[int, int], int] = {}
            for (j, _k, m), v in self.u.items():
                local[(j, m)] = local.get((j, m), 0) + int(round(values.get(v.name, 0.0)))
            for (j, m), r in self.demand.items():
                o = self.implicit.get(j)
                if o is not None and r - local.get((j, m), 0) > 0:
                    out[(j, o, m)] = r - local.get((j, m), 0)
        return out


def build_portfolio(
    jobs: Sequence[PortfolioJob],
    builds: Sequence[PortfolioBuild],
    months: int,
    *,
    hours_per_month: float = 730.0,
    availability: float = 0.8,
    capex_budget_usd: float | None = None,
    quotas_gpu_hours: Mapping[str, float] | None = None,
    integer_runs: bool = True,
    link_rows: bool = True,
    team_budgets: Mapping[str, float] | None = None,
    quota_caps: Mapping[str, float] | None = None,
) -> PortfolioModel:
    """The model above. Jobs with no option at all make it infeasible, as they should."""
    prob = pulp.LpProblem("portfolio", pulp.LpMinimize)
    mdl = PortfolioModel(problem=prob)
    kidx = {b.id: k for k, b in enumerate(builds)}
    H, A = hours_per_month, availability
    run_cat = pulp.LpInteger if integer_runs else pulp.LpContinuous
    substitute = not quotas_gpu_hours and not quota_caps
    # Per job: the rentals that get variables, and the builds worth a run.
    rentals_of: dict[int, list[int]] = {}
    uses_of: dict[int, list[BuildUse]] = {}
    constant = 0.0
    for j, job in enumerate(jobs):
        cheapest = min(range(len(job.rentals)), key=lambda o: job.rentals[o].cost_per_run_usd, default=None)
        if substitute and cheapest is not None:
            mdl.implicit[j] = cheapest
            c_star = job.rentals[cheapest].cost_per_run_usd
            rentals_of[j] = []
            uses_of[j] = [x for x in job.builds if x.energy_per_run_usd < c_star]
        else:
            rentals_of[j] = list(range(len(job.rentals)))
            uses_of[j] = list(job.builds)
    used = sorted({kidx[x.build] for xs in uses_of.values() for x in xs})
    for k in used:
        for m in range(months):
            mdl.y[(k, m)] = prob.add_variable(f"y_{k}_{m}", lowBound=0, cat=pulp.LpInteger)
    for j, job in enumerate(jobs):
        for m in range(months):
            if job.demand[m] <= 0:
                continue
            R = job.demand[m]
            mdl.demand[(j, m)] = R
            for o in rentals_of[j]:
                mdl.n[(j, o, m)] = prob.add_variable(f"n_{j}_{o}_{m}", lowBound=0, upBound=R, cat=pulp.LpInteger)
            for use in uses_of[j]:
                k = kidx[use.build]
                mdl.u[(j, k, m)] = prob.add_variable(f"u_{j}_{k}_{m}", lowBound=0, upBound=R, cat=run_cat)
            if j in mdl.implicit:
                constant += jobs[j].rentals[mdl.implicit[j]].cost_per_run_usd * R

    uses = {(j, kidx[x.build]): x for j, job in enumerate(jobs) for x in job.builds}

    def use_of(j: int, k: int) -> BuildUse:
        return uses[(j, k)]

    def run_cost(j: int, k: int) -> float:
        o = mdl.implicit.get(j)
        e = use_of(j, k).energy_per_run_usd
        return e - jobs[j].rentals[o].cost_per_run_usd if o is not None else e

    # The objective and the rows below are built as coefficient lists, not by PuLP's arithmetic
    # (each ``c * v`` and ``lpSum`` makes and merges expressions: most of a plan's model-building
    # time). ``_expr`` makes exactly the expressions that arithmetic made, term for term, in the
    # same order, so the solver is handed the same model (``tests/unit/test_portfolio_rows.py``).
    objective = _expr(
        [(v, jobs[j].rentals[o].cost_per_run_usd) for (j, o, _m), v in mdl.n.items()]
        + [(v, run_cost(j, k)) for (j, k, _m), v in mdl.u.items()]
        + [(v, builds[k].net_cost_by_month[m]) for (k, m), v in mdl.y.items()]
    )
    objective.constant = 0.0 + constant
    prob += objective, "total_cost_usd"

    for j, job in enumerate(jobs):
        for m in range(months):
            if job.demand[m] <= 0:
                continue
            terms = [(mdl.n[(j, o, m)], 1) for o in rentals_of[j]]
            terms += [(mdl.u[(j, kidx[x.build], m)], 1) for x in uses_of[j]]
            if j in mdl.implicit:
                if terms:
                    prob.addConstraint(
                        pulp.LpConstraint(_expr(terms), pulp.LpConstraintLE, rhs=job.demand[m]), f"demand_{j}_{m}")
            else:
                prob.addConstraint(
                    pulp.LpConstraint(_expr(terms), pulp.LpConstraintEQ, rhs=job.demand[m]), f"demand_{j}_{m}")

    loads: dict[tuple[int, int], list[tuple[pulp.LpVariable, float]]] = {}
    for (j, k, m), v in mdl.u.items():
        loads.setdefault((k, m), []).append((v, use_of(j, k).hours))
    for k in used:
        b = builds[k]
        for m in range(months):
            load = loads.get((k, m))
            if not load:
                continue
            # load - capacity <= 0, capacity = hours x sum_m' w[k][m'][m] y[k][m'] (``capacity_hours``)
            if b.term_months is None and b.unit_hours is None:
                hours, shares = H * A, [(mp, 1) for mp in range(m)] + [(m, b.first_month_share)]
            else:
                hours = H * A if b.unit_hours is None else b.unit_hours
                shares = [(mp, b.share(mp, m)) for mp in range(m + 1) if b.share(mp, m) > 0]
            owned = [(mdl.y[(k, mp)], -(w * hours)) for mp, w in shares]
            prob.addConstraint(pulp.LpConstraint(_expr(load + owned), pulp.LpConstraintLE), f"capacity_{k}_{m}")

    # Valid inequalities: a job can use build k in month m only if some unit is owned by then. They
    # cut off fractional purchases the capacity rows alone allow and speed the search a lot.
    # With continuous runs (``link_rows=False``) they only slow the search: capacity already ties runs
    # to integer purchases, and the 100-job bench solves in 1.4 s instead of 3.3 s without them.
    for (j, k, m), v in mdl.u.items() if link_rows else ():
        r = jobs[j].demand[m]
        owned = [(mdl.y[(k, mp)], -r) for mp in range(m + 1) if builds[k].active(mp, m)]
        prob.addConstraint(pulp.LpConstraint(_expr([(v, 1), *owned]), pulp.LpConstraintLE), f"link_{j}_{k}_{m}")

    if capex_budget_usd is not None and mdl.y:
        prob += (
            pulp.lpSum(builds[k].price_usd * v for (k, _m), v in mdl.y.items()) <= capex_budget_usd,
            "capex",
        )

    quota_terms: dict[tuple[str, int], list[pulp.LpAffineExpression]] = {}
    if quotas_gpu_hours:
        for (j, o, m), v in mdl.n.items():
            r = jobs[j].rentals[o]
            if r.provider in quotas_gpu_hours:
                quota_terms.setdefault((r.provider, m), []).append(r.gpus * r.hours * v)
    for p, q in (quotas_gpu_hours or {}).items():
        for m in range(months):
            terms = quota_terms.get((p, m))
            if terms:
                prob += pulp.lpSum(terms) <= q * H, f"quota_{_safe(p)}_{m}"
    acct_terms: dict[tuple[str, int], list[pulp.LpAffineExpression]] = {}
    if quota_caps:
        for (j, o, m), v in mdl.n.items():
            r = jobs[j].rentals[o]
            for key, units in r.quota_draw:
                if key in quota_caps:
                    acct_terms.setdefault((key, m), []).append(units * r.hours * v)
    for (key, m), terms in sorted(acct_terms.items()):
        prob += pulp.lpSum(terms) <= quota_caps[key] * H, f"acct_quota_{_safe(key)}_{m}"  # type: ignore[index]
    add_team_budget_rows(mdl, jobs, builds, months, team_budgets or {})
    return mdl


def team_spend_terms(
    mdl: PortfolioModel, jobs: Sequence[PortfolioJob], builds: Sequence[PortfolioBuild], j: int, m: int
) -> tuple[float, list[Any]]:
    """Job j's spend in month m as (constant, terms): its rentals plus its runs' energy on owned
    machines. With the rentals substituted out (``implicit``) that is
    c*[j] R[j][m] + sum_k (e[j][k] - c*[j]) u[j][k][m]."""
    o = mdl.implicit.get(j)
    c_star = jobs[j].rentals[o].cost_per_run_usd if o is not None else 0.0
    constant = c_star * mdl.demand.get((j, m), 0)
    terms: list[Any] = [jobs[j].rentals[oo].cost_per_run_usd * v for (jj, oo, mm), v in mdl.n.items() if jj == j and mm == m]
    energy = {b.build: b.energy_per_run_usd for b in jobs[j].builds}
    for (jj, k, mm), v in mdl.u.items():
        if jj == j and mm == m:
            terms.append((energy[builds[k].id] - c_star) * v)
    return constant, terms


def add_team_budget_rows(
    mdl: PortfolioModel, jobs: Sequence[PortfolioJob], builds: Sequence[PortfolioBuild], months: int,
    team_budgets: Mapping[str, float],
) -> None:
    """team_T_m:  sum_{j in T} (rentals of j in m + energy of j's runs in m) <= budget[T].

    What a team is charged each month for its runs; machines and commitments bought are capital
    shared by every team (``capex`` caps them), so they are not in a team's monthly spend."""
    for team, cap in sorted(team_budgets.items()):
        members = [j for j, job in enumerate(jobs) if job.team == team]
        for m in range(months):
            constant, terms = 0.0, []
            for j in members:
                c, t = team_spend_terms(mdl, jobs, builds, j, m)
                constant += c
                terms += t
            if constant == 0 and not terms:
                continue
            mdl.problem += pulp.lpSum(terms) + constant <= cap, f"team_{_safe(team)}_{m}"


def _expr(terms: list[tuple[pulp.LpVariable, float]]) -> pulp.LpAffineExpression:
    """sum c v over ``terms`` as PuLP's arithmetic makes it: a term with a zero coefficient is left
    out (``0 * v`` is an empty expression), a coefficient that is not finite is refused; the
    variables are distinct."""
    kept = []
    for v, c in terms:
        if c != 0:
            if not math.isfinite(c):
                raise pulp.PulpError("Cannot multiply variables with NaN/inf values")
            kept.append((v, c))
    return pulp.LpAffineExpression(kept)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)
