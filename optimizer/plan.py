"""Portfolio plan: a team's jobs over a horizon -> what to buy and when, where each run goes.

prepare (per job: the cheapest rentals that meet its deadline, and the builds it fits on; the
offers come in already pruned of dominated ones, and each job prices only the offers whose cost
floor (``candidates.bounds``, a roofline bound needing no estimate) is at most what its cheapest
rentals cost, found by first pricing the offers with the lowest floors: the same rentals as pricing
every offer) -> build (``ilp.portfolio``) -> solve (``ilp.portfolio_solve``: optimal within
``PLAN_GAP_REL``, proven) -> explain. For the comparisons the model is solved once more with only
builds (all-local); all-cloud needs no solve without quotas (each run on its job's cheapest
rental). The answer's ``timing`` splits the seconds into preparation, model building and solving,
and ``rental_search`` counts the rental offers preparation priced and those the floors let it skip.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from optimizer import costs
from optimizer.candidates import (
    Candidate,
    CandidateSet,
    CostAssumptions,
    Estimator,
    ShardingChoices,
    default_estimator,
    generate,
    is_product_estimator,
)
from optimizer.candidates.bounds import OfferFloors, OfferGroups, committed_floor_usd
from optimizer.candidates.offer_groups import OfferList, kept_per_list
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.workload import Constraints, Workload
from optimizer.explain import rejected_groups, solver_info
from optimizer.ilp.portfolio import (
    BuildUse,
    PortfolioBuild,
    PortfolioJob,
    RentalChoice,
)
from optimizer.ilp.portfolio_solve import PLAN_GAP_REL, PortfolioSolve, solve_portfolio
from optimizer.ilp.solve import SolveResult
from optimizer.offer import LocalBuild, Offer
from optimizer.plan_commitments import (
    CommitItem,
    CommitPool,
    cheapest_per_length,
    commit_items,
    commitment_pools,
    committed_run,
    monthly_charges,
    only_commitments,
    portfolio_commitments,
    with_commitment_uses,
    without_commitments,
)
from optimizer.plan_teams import TeamMonthSpend, explain_team_budgets
from optimizer.quotas import QuotaBook, draws, drop_short, plan_caps, vcpus_lookup
from optimizer.resale import build_resale_usd
from optimizer.results import Recipe, RejectedGroup, SolverInfo

RENTALS_PER_JOB = 3
# The rental search first prices the offers whose cost floor is within this factor of the lowest
# floor, widening by TIER_GROWTH while that finds too few rentals; estimates come out 2-4x the
# roofline floor, so the first look usually holds the winner.
FIRST_TIER_FACTOR = 2.0
TIER_GROWTH = 4.0
# Floors are exact arithmetic lower bounds; this absorbs float rounding between two formulas and
# the 1e-9 of an increment that ``costs.billed_hours`` forgives.
FLOOR_TOLERANCE_REL = 1e-6
AVAILABILITY = costs.MAX_UTILIZATION  # share of a month an owned machine can run jobs (maintenance, other use)


class PlanJobInput(BaseModel):
    """What the plan needs of a job (``service.schemas.JobSpec`` has these fields)."""

    name: str
    workload: Workload
    runs_per_month: float = 1
    deadline_hours: float | None = None
    start_month: int = 0
    team: str | None = None


class BuyItem(BaseModel):
    build: str
    count: int
    month: int
    price_usd: float
    name: str = ""


class Assignment(BaseModel):
    job: str
    month: int
    kind: str
    provider: str
    region: str | None
    instance_type: str
    gpu: str
    pricing: str
    runs: int
    hours_per_run: float
    cost_usd: float
    # What each run trains (the job's global batch, idle GPUs) and its risks: issue 19.
    recipe: Recipe | None = None
    warnings: list[str] = Field(default_factory=list)


class MonthCost(BaseModel):
    month: int
    cloud_usd: float
    energy_usd: float
    capex_usd: float
    resale_usd: float
    total_usd: float


class UnplacedJob(BaseModel):
    job: str
    rejected: list[RejectedGroup]


class PlanResult(BaseModel):
    buy: list[BuyItem]
    assignments: list[Assignment]
    total_cost_usd: float | None
    all_cloud_cost_usd: float | None
    all_local_cost_usd: float | None
    monthly: list[MonthCost]
    solver: SolverInfo
    horizon_months: int
    unplaced: list[UnplacedJob] = Field(default_factory=list)
    prices_as_of: dict[str, datetime] = Field(default_factory=dict)
    snapshot_id: str = ""
    assumptions: dict[str, float] = Field(default_factory=dict)
    # Where the time went: preparing the options (estimates, prices), building and solving the model.
    timing: dict[str, float] = Field(default_factory=dict)
    # Rental offers preparation priced over all jobs and looks, and those their cost floors let it skip.
    rental_search: dict[str, int] = Field(default_factory=dict)
    solve_method: str = ""
    # Instances committed for a term (reserved, savings plan, ...): optimizer.plan_commitments.
    commit: list[CommitItem] = Field(default_factory=list)
    all_cloud_committed_cost_usd: float | None = Field(
        default=None, description="every run in the cloud, on demand or on committed instances, nothing bought"
    )
    commitment_value_after_horizon: bool = False
    # constraints.team_budgets: each capped team's spend per month in this plan, and why a plan
    # that cannot keep to them cannot (optimizer.plan_teams).
    team_spend: list[TeamMonthSpend] = Field(default_factory=list)
    budget_notes: list[str] = Field(default_factory=list)


def monthly_demand(runs_per_month: float, start_month: int, months: int) -> list[int]:
    """Whole runs due each month: a fractional cadence (0.5 a month) lands every other month."""
    out = []
    for m in range(months):
        k = m - start_month
        out.append(0 if k < 0 else math.floor(runs_per_month * (k + 1) + 1e-9) - math.floor(runs_per_month * k + 1e-9))
    return out


@dataclasses.dataclass(slots=True)
class _Prepared:
    jobs: list[PortfolioJob]
    rentals: dict[str, list[Candidate]]
    local: dict[str, dict[str, Candidate]]
    unplaced: list[UnplacedJob]
    # Offers handed to option generation for rentals, over every look (a catalog's offers per job
    # without floors), and those the floors left out of each job's last look.
    offers_priced: int = 0
    offers_skipped: int = 0
    # Per job: the on-demand rentals of committable offers that could carry its cheapest committed
    # run (where a commitment would be placed), and the committable offers priced to find them.
    ranked: dict[str, list[Candidate]] = dataclasses.field(default_factory=dict)
    committable_priced: int = 0


def _distinct_providers(ranked: Sequence[Candidate], n: int) -> list[Candidate]:
    """The cheapest rental of each of the first ``n`` providers, cheapest first."""
    picked: list[Candidate] = []
    seen: set[str] = set()
    for cand in ranked:
        if cand.provider not in seen:
            picked.append(cand)
            seen.add(cand.provider)
        if len(picked) == n:
            break
    return picked


def _cheapest_rentals(
    offers: list[Offer],
    floors: OfferFloors | None,
    n: int,
    search: Callable[[list[Offer]], CandidateSet],
) -> tuple[list[Candidate], CandidateSet, int, int]:
    """The job's cheapest rentals of ``n`` distinct providers, exactly as ``search(offers)`` finds
    them; the candidate set they come from; offers priced; offers left out.

    With cost floors (``candidates.bounds``), offers are priced cheapest floor first: a look at the
    offers with the lowest floors finds ``n`` rentals, the last costing ``bar``; every offer that
    could rank at or below ``bar`` has a floor at most ``bar``, so option generation over exactly
    those offers (groups kept in catalog order, so ties fall as on the whole catalog) ranks the
    rentals up to ``bar`` as the whole catalog does, and picks the same ones. A look that finds
    fewer widens; the last look is the whole catalog, whose rejections then explain the job.
    """
    ordered = sorted(floors.floors) if floors is not None else []
    priced = 0
    if ordered and 0 < ordered[0] < float("inf"):
        threshold = ordered[0] * FIRST_TIER_FACTOR
        while threshold < ordered[-1]:
            look = floors.subset(threshold)  # type: ignore[union-attr]
            found = search(look)
            priced += len(look)
            picked = _distinct_providers(found.ranked, n)
            if len(picked) == n:
                bar = max(c.cost_per_run_usd for c in picked) * (1 + FLOOR_TOLERANCE_REL)
                if bar > threshold:
                    look = floors.subset(bar)  # type: ignore[union-attr]
                    found = search(look)
                    priced += len(look)
                    picked = _distinct_providers(found.ranked, n)
                return picked, found, priced, len(offers) - len(look)
            threshold *= TIER_GROWTH
    found = search(offers)
    return _distinct_providers(found.ranked, n), found, priced + len(offers), 0


def _committed_per_run(ranked: Sequence[Candidate], offers: Sequence[Offer]) -> float | None:
    """The cheapest committed run among ``ranked``, as ``plan_commitments.commitment_pools`` finds it."""
    pools = commitment_pools({"job": ranked}, offers).get("job")
    if not pools:
        return None
    rental = pools[0].rental
    return min(p.commitment.effective_hourly_usd for p in pools) * rental.nodes * rental.hours


def _committable_rentals(
    offers: list[Offer],
    floors: OfferFloors | None,
    search: Callable[[list[Offer]], CandidateSet],
    a: CostAssumptions,
    rate: Callable[[Offer], float | None],
) -> tuple[list[Candidate], int]:
    """Every on-demand rental of a committable offer that could carry the job's cheapest committed
    run, ranked as pricing every committable offer ranks them; and the offers priced.

    The commitment goes on the rental whose committed run is cheapest (``plan_commitments``), so
    it is looked for among all offers with terms, not only among the rentals cheapest on demand
    (what the rental search guarantees), and the answer is the same with floors and without:
    offers are priced lowest committed floor first (``bounds.committed_floor_usd``), and a look
    whose cheapest committed run costs ``bar`` is widened to every offer with a floor up to it.
    ``rate``: an offer's lowest committed hourly rate, None without terms (``_committed_rates``).
    """
    if floors is None:
        pool = [o for o in offers if rate(o) is not None]
        return list(search(pool).ranked) if pool else [], len(pool)
    rows = []  # (catalog place, offer, committed floor), in catalog order
    for o, h, place in zip(floors.offers, floors.gpu_hours, floors.position, strict=True):
        r = rate(o)
        if r is not None:
            rows.append((place, o, committed_floor_usd(o, h, r, assumptions=a)))
    rows.sort(key=lambda t: t[0])
    if not rows:
        return [], 0
    ordered = sorted(f for _, _, f in rows)
    priced = 0
    threshold = ordered[0] * FIRST_TIER_FACTOR
    while 0 < ordered[0] < float("inf") and threshold < ordered[-1]:
        look = [o for _, o, f in rows if f <= threshold]
        found = search(look)
        priced += len(look)
        best = _committed_per_run(found.ranked, look)
        if best is not None:
            bar = best * (1 + FLOOR_TOLERANCE_REL)
            if bar > threshold:
                look = [o for _, o, f in rows if f <= bar]
                found = search(look)
                priced += len(look)
            return list(found.ranked), priced
        threshold *= TIER_GROWTH
    pool = [o for _, o, _ in rows]
    return list(search(pool).ranked), priced + len(pool)


def _committed_rate(o: Offer) -> float | None:
    """An offer's lowest committed hourly rate; None without a term to commit to."""
    terms = cheapest_per_length(o)
    return min(t.effective_hourly_usd for t in terms) if terms else None


# Each offer's committed rate (``_committed_rate``), by id, kept per shared offer list: each job of
# each plan asks it of every offer with a floor.
_COMMITTED_RATES: LruMemo[int, tuple[list[Offer], dict[int, float | None]]] = LruMemo(64)


def _committed_rates(offers: list[Offer]) -> Callable[[Offer], float | None]:
    """``_committed_rate`` of each of ``offers``, the plan's offers: kept per ``OfferList`` (which
    holds its offers, and so their ids), worked out once per plan for a plain list. A plan asks it
    only of these (its floors' offers are drawn from them), so an offer not among them raises."""
    table = kept_per_list(_COMMITTED_RATES, offers, lambda: {id(o): _committed_rate(o) for o in offers})
    return lambda o: table[id(o)]


def _prepare(
    jobs: Sequence[PlanJobInput],
    constraints: Constraints,
    offers: list[Offer],
    builds: list[LocalBuild],
    months: int,
    estimator: Estimator,
    shardings: ShardingChoices | None,
    a: CostAssumptions,
    rentals_per_job: int = RENTALS_PER_JOB,
    prune: bool = True,
    quota_book: QuotaBook | None = None,
    commitments: bool = True,
    checkpoint: Callable[[], None] | None = None,
) -> _Prepared:
    out = _Prepared([], {}, {}, [])
    # constraints.respect_quotas: rentals one run of which the account cannot launch are dropped,
    # and the rest say what they hold of each quota (a month's runs share it, ilp.portfolio).
    vcpus_of = vcpus_lookup(offers) if quota_book is not None else None
    one_unit = dataclasses.replace(a, max_local_units=1)
    # The cost floors follow the product estimator's formulas.
    groups = OfferGroups.of(offers, constraints) if prune and is_product_estimator(estimator) else None
    committed_rate = _committed_rates(offers) if commitments else None
    for job in jobs:
        if checkpoint is not None:
            checkpoint()
        c = constraints.model_copy(update={"deadline_hours": job.deadline_hours, "budget_usd": None})
        cloud_c = c.model_copy(update={"include_local": False})

        def search(
            subset: list[Offer], w: Workload = job.workload, cc: Constraints = cloud_c, top: int = rentals_per_job * 4,
        ) -> CandidateSet:
            if quota_book is not None and vcpus_of is not None:
                found = generate(
                    w, cc, subset, [], runs=1, top=top, estimator=estimator,
                    shardings=shardings, assumptions=a,
                )
                drop_short(found, quota_book, vcpus_of)
                return found
            return generate(
                w, cc, subset, [], runs=1, top=top, estimator=estimator,
                shardings=shardings, assumptions=a,
            )

        def search_committable(subset: list[Offer], cc: Constraints = cloud_c) -> CandidateSet:
            # Commitments go on on-demand rentals; every configuration is ranked (no cut at ``top``).
            on_demand = cc.model_copy(update={"allow_spot": False})
            return search(subset, cc=on_demand, top=max(1, len(subset)) * max(1, a.max_nodes) * 8)

        floors = (
            groups.floors(job.workload, allow_spot=constraints.allow_spot, assumptions=a)
            if groups is not None else None
        )
        # A few cheap rentals from different providers, so quotas leave somewhere to go.
        picked, cloud, priced, skipped = _cheapest_rentals(offers, floors, rentals_per_job, search)
        out.offers_priced += priced
        out.offers_skipped += skipped
        if committed_rate is not None:
            out.ranked[job.name], committable = _committable_rentals(
                offers, floors, search_committable, a, committed_rate)
            out.committable_priced += committable
        # Builds bought ahead for the plan: their lead time is modelled per month, not per run.
        local_c = c.model_copy(update={"deadline_hours": None})
        local = generate(
            job.workload, local_c, [], builds, runs=1, top=len(builds) + 1, estimator=estimator,
            shardings=shardings, assumptions=one_unit,
        )
        fits = {
            cand.instance_type: cand
            for cand in local.ranked
            if job.deadline_hours is None or cand.hours <= job.deadline_hours
        }
        demand = monthly_demand(job.runs_per_month, job.start_month, months)
        if not picked and not fits:
            if sum(demand) > 0:
                tally = cloud.rejected
                for reason, n in local.rejected.counts.items():
                    for ex in local.rejected.examples.get(reason, [])[:1]:
                        tally.add(reason, ex, n)
                out.unplaced.append(UnplacedJob(job=job.name, rejected=rejected_groups(tally)))
            continue
        out.rentals[job.name] = picked
        out.local[job.name] = fits
        out.jobs.append(
            PortfolioJob(
                name=job.name,
                demand=demand,
                rentals=[
                    RentalChoice(key=r.key, provider=r.provider, cost_per_run_usd=r.cost_per_run_usd,
                                 hours=r.hours, gpus=r.total_gpus,
                                 quota_draw=draws(r, vcpus_of) if vcpus_of is not None else ())
                    for r in picked
                ],
                builds=[
                    BuildUse(build=bid, hours=cand.hours, energy_per_run_usd=cand.cost_per_run_usd)
                    for bid, cand in fits.items()
                ],
                team=job.team,
            )
        )
    return out


def _portfolio_builds(builds: Iterable[LocalBuild], months: int, held_months: float | None) -> list[PortfolioBuild]:
    out = []
    for b in builds:
        net = []
        for m in range(months):
            # Sold at the end of the horizon (or after ``held_months`` if that is set).
            age = months - m if held_months is None else held_months
            net.append(b.price_usd - build_resale_usd(b, age))  # the one valuation (``optimizer.resale``)
        out.append(
            PortfolioBuild(
                id=b.id, price_usd=b.price_usd, net_cost_by_month=net,
                first_month_share=max(0.0, 1.0 - b.lead_time_days / (costs.HOURS_PER_MONTH / 24)),
            )
        )
    return out


def _strip(jobs: Sequence[PortfolioJob], rentals: bool, local: bool) -> list[PortfolioJob]:
    return [
        dataclasses.replace(j, rentals=j.rentals if rentals else [], builds=j.builds if local else [])
        for j in jobs
    ]


def plan(
    jobs: Sequence[PlanJobInput | BaseModel],
    horizon_months: int,
    constraints: Constraints,
    offers: Iterable[Offer],
    builds: Iterable[LocalBuild],
    *,
    capex_budget_usd: float | None = None,
    prices_as_of: Mapping[str, datetime] | None = None,
    snapshot_id: str = "",
    estimator: Estimator | None = None,
    shardings: ShardingChoices | None = None,
    time_limit_s: float = 30.0,
    availability: float = AVAILABILITY,
    quotas_gpu_hours: Mapping[str, float] | None = None,
    quota_book: QuotaBook | None = None,
    assumptions: CostAssumptions | None = None,
    commitments: bool = True,
    commitment_value_after_horizon: bool = False,
    checkpoint: Callable[[], None] | None = None,
) -> PlanResult:
    """``commitments``: let the plan commit instances for a term where a rental offers terms;
    ``commitment_value_after_horizon``: charge a term only for its months within the horizon;
    ``checkpoint``: called before each job's options are prepared, to stop a plan that has run out
    of time (it raises). Options made from what earlier requests kept call no estimator, so a
    guarded estimator alone would not stop a long plan of jobs that differ only in amount."""
    a = assumptions or CostAssumptions()
    est = estimator or default_estimator()
    t0 = time.perf_counter()
    job_inputs = [PlanJobInput.model_validate(j.model_dump()) for j in jobs]
    # A snapshot's shared list as it is: what is derived from all of it (the groups a filter makes,
    # the vCPUs and commitments indexes, the committed rates) is kept per list across requests.
    offer_list = offers if isinstance(offers, OfferList) else list(offers)
    build_list = list(builds) if constraints.include_local else []
    # Without provider quotas a run always goes to the job's cheapest rental or to a build, so the
    # other rentals are dominated and only make the integer program larger.
    # Account quotas (``quota_book``) count only with ``constraints.respect_quotas``.
    book = quota_book if quota_book is not None and constraints.respect_quotas else None
    caps = plan_caps(book) if book is not None else None
    per_job = RENTALS_PER_JOB if quotas_gpu_hours or caps else 1
    prep = _prepare(job_inputs, constraints, offer_list, build_list, horizon_months, est, shardings, a, per_job,
                    quota_book=book, commitments=commitments, checkpoint=checkpoint)
    by_id = {b.id: b for b in build_list}
    used_builds = sorted({u.build for j in prep.jobs for u in j.builds})
    pbuilds = _portfolio_builds([by_id[i] for i in used_builds], horizon_months, a.held_months)
    machines = list(pbuilds)
    pools = commitment_pools(prep.ranked, offer_list) if commitments else {}
    if pools:
        pbuilds += portfolio_commitments(pools, horizon_months, commitment_value_after_horizon)
        prep.jobs = with_commitment_uses(prep.jobs, pools)
        for job_name, ps in pools.items():
            for pool in ps:
                prep.local.setdefault(job_name, {})[pool.id] = committed_run(pool.rental)
    timing = {"prepare_s": time.perf_counter() - t0, "build_s": 0.0, "solve_s": 0.0}
    search = {"offers_priced": prep.offers_priced, "offers_skipped": prep.offers_skipped,
              "committable_offers_priced": prep.committable_priced}

    def run(pjobs: list[PortfolioJob], pb: list[PortfolioBuild],
            budgets: Mapping[str, float] | None = None) -> PortfolioSolve:
        out = solve_portfolio(
            pjobs, pb, horizon_months, hours_per_month=costs.HOURS_PER_MONTH, availability=availability,
            capex_budget_usd=capex_budget_usd, quotas_gpu_hours=quotas_gpu_hours, time_limit_s=time_limit_s,
            quota_caps=caps,
            team_budgets=budgets,
        )
        timing["build_s"] += out.build_s
        timing["solve_s"] += out.solve_s
        return out

    if not prep.jobs:
        # Nothing can run anywhere: an answer, with the reasons, not an error.
        return PlanResult(
            buy=[], assignments=[], total_cost_usd=None, all_cloud_cost_usd=None, all_local_cost_usd=None,
            monthly=[], solver=solver_info(None), horizon_months=horizon_months, unplaced=prep.unplaced,
            prices_as_of=dict(prices_as_of or {}), snapshot_id=snapshot_id, timing=_rounded(timing),
            rental_search=search,
        )
    # Team budgets cap the plan itself; the all-cloud and all-local comparisons stay uncapped.
    main = run(prep.jobs, pbuilds, constraints.team_budgets)
    all_cloud = all_local = None
    if all(j.rentals for j in prep.jobs if sum(j.demand)):
        if quotas_gpu_hours or caps:
            rc = run(_strip(prep.jobs, True, False), []).result
            all_cloud = rc.objective if rc.has_solution else None
        else:
            # No quotas: every run on its job's cheapest rental; nothing to solve.
            all_cloud = sum(min(r.cost_per_run_usd for r in j.rentals) * sum(j.demand)
                            for j in prep.jobs if sum(j.demand))
    machine_jobs = without_commitments(prep.jobs)
    if machines and all(j.builds for j in machine_jobs if sum(j.demand)):
        rl = run(_strip(machine_jobs, False, True), machines).result
        all_local = rl.objective if rl.has_solution else None
    all_committed = None
    if pools and all_cloud is not None:
        rcm = run(only_commitments(prep.jobs), [b for b in pbuilds if b.term_months is not None]).result
        all_committed = rcm.objective if rcm.has_solution else None
    result = _explain(
        prep, pbuilds, by_id, main.model, main.result, horizon_months, all_cloud, all_local,
        prices_as_of or {}, snapshot_id, availability,
    )
    result.timing = _rounded(timing)
    result.rental_search = search
    if pools:
        explain_commitments(result, main.model, main.result, pbuilds, pools, horizon_months,
                            commitment_value_after_horizon, all_committed)
    result.assumptions.update(gap_rel=PLAN_GAP_REL)
    result.solve_method = main.method
    if constraints.team_budgets:
        explain_team_budgets(result, job_inputs, prep.jobs, constraints.team_budgets, horizon_months)
    return result


def explain_commitments(
    result: PlanResult, mdl: object, res: SolveResult, pbuilds: Sequence[PortfolioBuild],
    pools: Mapping[str, list[CommitPool]], months: int, value_after_horizon: bool, all_committed: float | None,
) -> None:
    """``commit`` lines, their monthly charges and the committed comparison (in place). Runs on
    committed instances are costed (storage only) under ``cloud_usd`` by ``_explain``; the
    instances' charges are added here."""
    from optimizer.ilp.portfolio import PortfolioModel

    assert isinstance(mdl, PortfolioModel)
    result.commitment_value_after_horizon = value_after_horizon
    result.all_cloud_committed_cost_usd = round(all_committed, 2) if all_committed is not None else None
    if not res.has_solution:
        return
    bought = {(pbuilds[k].id, m): res.integer(v.name) for (k, m), v in mdl.y.items()
              if pbuilds[k].term_months is not None}
    result.commit = commit_items(bought, pools, months, value_after_horizon)
    for m, usd in enumerate(monthly_charges(result.commit, months)):
        row = result.monthly[m]
        row.cloud_usd = round(row.cloud_usd + usd, 2)
        row.total_usd = round(row.total_usd + usd, 2)


def _rounded(timing: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in timing.items()}


def _explain(
    prep: _Prepared,
    pbuilds: list[PortfolioBuild],
    by_id: Mapping[str, LocalBuild],
    mdl: object,
    res: SolveResult,
    months: int,
    all_cloud: float | None,
    all_local: float | None,
    prices_as_of: Mapping[str, datetime],
    snapshot_id: str,
    availability: float,
) -> PlanResult:
    from optimizer.ilp.portfolio import PortfolioModel

    assert isinstance(mdl, PortfolioModel)
    buy: list[BuyItem] = []
    assignments: list[Assignment] = []
    cloud = [0.0] * months
    energy = [0.0] * months
    capex = [0.0] * months
    resale = [0.0] * months
    if res.has_solution:
        for (k, m), var in mdl.y.items():
            n = res.integer(var.name)
            if n > 0 and pbuilds[k].term_months is None:  # commitments: explain_commitments
                b = pbuilds[k]
                buy.append(BuyItem(build=b.id, count=n, month=m, price_usd=b.price_usd, name=by_id[b.id].name))
                capex[m] += b.price_usd * n
                resale[months - 1] += (b.price_usd - b.net_cost_by_month[m]) * n
        for (j, o, m), n in mdl.rental_runs(res.values).items():
            job = prep.jobs[j]
            c = prep.rentals[job.name][o]
            cloud[m] += c.cost_per_run_usd * n
            assignments.append(_assign(job.name, m, c, n))
        for (j, k, m), var in mdl.u.items():
            n = res.integer(var.name)
            if n > 0:
                job = prep.jobs[j]
                c = prep.local[job.name][pbuilds[k].id]
                if c.pricing == "commitment":  # storage beside committed instances
                    cloud[m] += c.cost_per_run_usd * n
                else:
                    energy[m] += c.cost_per_run_usd * n
                assignments.append(_assign(job.name, m, c, n))
    assignments.sort(key=lambda x: (x.month, x.job, x.kind, x.instance_type))
    monthly = [
        MonthCost(
            month=m, cloud_usd=round(cloud[m], 2), energy_usd=round(energy[m], 2), capex_usd=round(capex[m], 2),
            resale_usd=round(-resale[m], 2), total_usd=round(cloud[m] + energy[m] + capex[m] - resale[m], 2),
        )
        for m in range(months)
    ]
    return PlanResult(
        buy=sorted(buy, key=lambda b: (b.month, b.build)),
        assignments=assignments,
        total_cost_usd=round(res.objective, 2) if res.objective is not None else None,
        all_cloud_cost_usd=round(all_cloud, 2) if all_cloud is not None else None,
        all_local_cost_usd=round(all_local, 2) if all_local is not None else None,
        monthly=monthly,
        solver=solver_info(res),
        horizon_months=months,
        unplaced=prep.unplaced,
        prices_as_of=dict(prices_as_of),
        snapshot_id=snapshot_id,
        assumptions={"availability": availability, "hours_per_month": costs.HOURS_PER_MONTH},
    )


def _assign(job: str, month: int, c: Candidate, runs: int) -> Assignment:
    return Assignment(
        job=job, month=month, kind=c.kind, provider=c.provider, region=c.region,
        instance_type=c.instance_type, gpu=c.gpu, pricing=c.pricing, runs=runs,
        hours_per_run=round(c.hours, 4), cost_usd=round(c.cost_per_run_usd * runs, 2),
        recipe=c.recipe, warnings=list(c.warnings),
    )
