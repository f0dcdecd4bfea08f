"""Single-job quote: the cheapest feasible way to run ``runs`` runs of one workload.

prepare (``candidates``) -> build (``ilp.single``) -> solve (``ilp.solve``) -> explain (``explain``).
Prices come in as arguments; this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

from optimizer.candidates import CostAssumptions, Estimator, ShardingChoices, default_estimator, generate
from optimizer.explain import build_quote
from optimizer.ilp.single import build_single
from optimizer.ilp.solve import solve
from optimizer.price_warnings import DEFAULT_STALE_AFTER_DAYS, price_warnings
from optimizer.results import Quote
from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import LocalBuild, Offer

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
) -> Quote:
    """Cheapest feasible option (the ILP's pick), alternatives, fastest option, rejections.

    Nothing feasible is an answer, not an error: ``best`` is None and ``rejected`` says why.
    """
    a = assumptions or CostAssumptions()
    offers = list(offers)  # read twice: candidates, then the price warnings
    cs = generate(
        workload, constraints, offers, builds,
        runs=runs, top=top, estimator=estimator or default_estimator(), shardings=shardings,
        assumptions=a, quotas=quotas,
    )
    best = None
    result = None
    if cs.pareto:
        model = build_single(
            cs.pareto,
            deadline_hours=constraints.deadline_hours,
            budget_usd=constraints.budget_usd,
            quotas=quotas,
        )
        result = solve(model.problem, time_limit_s)
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
    # Usual price levels come from ``price_reference`` (every offer) when the offers were pruned.
    shown = ([q.best] if q.best is not None else []) + q.options
    q.warnings.extend(price_warnings(shown, offers, prices_as_of, now=now or datetime.now(UTC),
                                     stale_after_days=stale_after_days, reference=price_reference))
    return q
