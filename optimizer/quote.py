"""Single-job quote: the cheapest feasible way to run ``runs`` runs of one workload.

prepare (``candidates``) -> build (``ilp.single``) -> solve (``ilp.solve``) -> explain (``explain``).
Prices come in as arguments; this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from optimizer.bill_calibration import annotate, calibrate_candidates
from optimizer.candidates import CostAssumptions, Estimator, ShardingChoices, default_estimator, generate
from optimizer.commitments import with_commitments
from optimizer.estimator.workload import Constraints, Workload
from optimizer.explain import answer_rows, build_quote
from optimizer.ilp.single import build_single
from optimizer.ilp.solve import solve
from optimizer.offer import LocalBuild, Offer
from optimizer.price_warnings import DEFAULT_STALE_AFTER_DAYS, age_days, price_screen, price_warnings
from optimizer.quotas import QuotaBook, annotate_options, drop_short, vcpus_lookup
from optimizer.results import Quote
from optimizer.runs import CalibrationFactor

DEFAULT_TIME_LIMIT_S = 10.0


def quote(
    workload: Workload,
    constraints: Constraints,
    offers: Iterable[Offer],
    builds: Iterable[LocalBuild],
    *,
    runs: int = 1,
    top: int = 10,
    prices_as_of: Mapping[str, datetime],
    snapshot_id: str,
    estimator: Estimator | None = None,
    shardings: ShardingChoices | None = None,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    quotas: Mapping[str, int] | None = None,
    assumptions: CostAssumptions | None = None,
    now: datetime | None = None,
    stale_after_days: float = DEFAULT_STALE_AFTER_DAYS,
    price_reference: Sequence[Offer] | None = None,
    calibration: Mapping[tuple[str, str], CalibrationFactor] | None = None,
    quota_book: QuotaBook | None = None,
) -> Quote:
    """Cheapest feasible option (the ILP's pick), alternatives, fastest option, rejections.

    Nothing feasible is an answer, not an error: ``best`` is None and ``rejected`` says why.
    """
    a = assumptions or CostAssumptions()
    given = offers
    # Read twice (candidates, then the price warnings), never changed: a list is used as it is,
    # so what is kept per offer list (``candidates.cloud._filter_offers``) finds it again.
    offers = given if isinstance(given, list) else list(given)
    now = now or datetime.now(UTC)
    # The caller's own sequence when it is one, so a catalog passed again reuses its screen.
    catalog = price_reference if price_reference is not None else (given if isinstance(given, list) else offers)
    screen = None if constraints.allow_suspect_prices else price_screen(catalog, now)
    # Only the cloud rows the answer can show are made into candidates; all of them where learnt
    # factors may reorder the rows or quotas may take shown rows out (each counted as a rejection).
    rows = None if calibration or constraints.respect_quotas else answer_rows(top)
    cs = generate(
        workload, constraints, offers, builds,
        runs=runs, top=top, estimator=estimator or default_estimator(), shardings=shardings,
        assumptions=a, quotas=quotas, screen=screen, rows=rows,
    )
    # Factors learnt from reconciled bills (per provider and GPU) correct hours and rates first,
    # so the solver chooses on the corrected figures.
    cs = calibrate_candidates(cs, calibration or {})
    # Quotas as data (optimizer.quotas): with respect_quotas, options the account cannot launch go.
    book = quota_book if quota_book is not None else QuotaBook()
    vcpus_of = vcpus_lookup(offers)
    if constraints.respect_quotas:
        drop_short(cs, book, vcpus_of)
    best = None
    result = None
    if cs.pareto:
        model = build_single(
            cs.pareto,
            deadline_hours=constraints.deadline_hours,
            budget_usd=constraints.budget_usd,
            quotas=quotas,
        )
        # Choosing one candidate under the side rows is a MIP whose relaxation is almost always
        # integral (its optimum a vertex: one candidate); without presolve, which on a model this
        # small costs more than it saves, HiGHS's simplex finds it in 60 % of the MIP's time.
        # Where the rows make it fractional, the search runs as before, presolve and all.
        result = solve(model.problem, time_limit_s, relaxation_first=True, relaxation_presolve=False)
        best = model.picked(result.values)
    q = build_quote(
        best=best,
        ranked=cs.ranked,
        pareto=cs.pareto,
        tally=cs.rejected,
        result=result,
        prices_as_of=prices_as_of,
        snapshot_id=snapshot_id,
        runs=runs,
        top=top,
        assumptions=a,
        counts={
            "feasible_offers": cs.feasible_offers,
            "pareto_candidates": len(cs.pareto),
            "estimator_calls": cs.estimates,
        },
    )
    annotate(q, calibration or {})
    annotate_options([q.best, q.fastest, *q.options], book, vcpus_of)
    # Usual price levels come from ``price_reference`` (every offer) when the offers were pruned,
    # or from the levels a pruned view carries (``offer_groups.OfferList.part``): the same as the screen's.
    shown = ([q.best] if q.best is not None else []) + q.options
    q.warnings.extend(price_warnings(shown, offers, prices_as_of, now=now,
                                     stale_after_days=stale_after_days, reference=catalog))
    with_price_ages(q, now)
    with_commitments([q.best, q.fastest, *q.options], offers)
    return q


def with_price_ages(q: Quote, now: datetime) -> None:
    """Each option's price age in days next to its ``as_of`` (in place)."""
    for o in [q.best, q.fastest, *q.options]:
        if o is not None:
            o.price_age_days = age_days(o.as_of, now)
