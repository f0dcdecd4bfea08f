"""Option generation: offers x nodes x sharding x pricing, and builds x units -> a Candidate, or a
rejection reason counted in a ``RejectionTally``.

Cloud offers are priced in ``candidates.cloud``, local builds in ``candidates.local``; this module
joins them, prunes to the Pareto set and ranks, and is where callers import everything from.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from optimizer.candidates.amounts import MovingMemo
from optimizer.candidates.cloud import (
    _ROW_SLACK,
    MIN_GPUS_FOR_MULTI_NODE,
    _cloud_candidate,
    _Config,
    cloud_candidates,
)
from optimizer.candidates.estimator import (
    Estimator,
    Read,
    ShardingChoices,
    default_estimator,
    default_shardings,
    is_product_estimator,
)
from optimizer.candidates.local import local_candidates
from optimizer.candidates.rejections import (
    EXCLUDED,
    LATE,
    NO_HOST_CPU,
    NO_HOST_RAM,
    NO_MACHINE_HOURS,
    NO_PRICE,
    NO_VRAM,
    OVER_BUDGET,
    OVER_QUOTA,
    TOO_MANY_GPUS,
    UNKNOWN_GPU,
    UNSUPPORTED,
    RejectionTally,
)
from optimizer.candidates.types import (
    GIB_PER_GB,
    MAX_LOCAL_UNITS,
    MAX_MACHINES,
    MAX_NODES,
    MAX_TOTAL_GPUS,
    Candidate,
    CandidateSet,
    CostAssumptions,
    Pricing,
)
from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import LocalBuild, Offer
from optimizer.price_warnings import PriceScreen
from optimizer.spot_risk import SpotOptions

__all__ = [
    "EXCLUDED",
    "GIB_PER_GB",
    "LATE",
    "MAX_LOCAL_UNITS",
    "MAX_MACHINES",
    "MAX_NODES",
    "MAX_TOTAL_GPUS",
    "MIN_GPUS_FOR_MULTI_NODE",
    "NO_HOST_CPU",
    "NO_HOST_RAM",
    "NO_MACHINE_HOURS",
    "NO_PRICE",
    "NO_VRAM",
    "OVER_BUDGET",
    "OVER_QUOTA",
    "TOO_MANY_GPUS",
    "UNKNOWN_GPU",
    "UNSUPPORTED",
    "Candidate",
    "CandidateSet",
    "CostAssumptions",
    "Estimator",
    "Pricing",
    "RejectionTally",
    "ShardingChoices",
    "cloud_candidates",
    "default_estimator",
    "default_shardings",
    "generate",
    "is_product_estimator",
    "local_candidates",
    "pareto",
]


def pareto(cands: Iterable[Candidate]) -> list[Candidate]:
    """Candidates no other candidate beats on both hours and cost (ties: the first kept)."""
    out: list[Candidate] = []
    best_cost = float("inf")
    for c in sorted(cands, key=lambda c: (c.hours, c.cost_usd, c.key)):
        if c.cost_usd < best_cost - 1e-9:
            out.append(c)
            best_cost = c.cost_usd
    return out


def generate(
    workload: Workload,
    constraints: Constraints,
    offers: Iterable[Offer],
    builds: Iterable[LocalBuild],
    *,
    runs: int = 1,
    top: int = 10,
    estimator: Estimator,
    shardings: ShardingChoices | None = None,
    assumptions: CostAssumptions | None = None,
    quotas: Mapping[str, int] | None = None,
    screen: PriceScreen | None = None,
    rows: int | None = None,
) -> CandidateSet:
    """All candidates for one job, pruned to the Pareto set, plus the ``top`` cheapest per offer.

    ``screen``: prices it calls suspect are rejected with its reason unless the constraints allow them.
    ``rows``: ``ranked`` holds the ``rows`` cheapest cloud candidates (and any row as cheap within
    rounding) instead of all it holds otherwise, for a caller that shows no more
    (``explain.answer_rows``); None: all of them."""
    a = assumptions or CostAssumptions()
    if constraints.egress_gb and not a.egress_gb_per_run:
        a = dataclasses.replace(a, egress_gb_per_run=constraints.egress_gb)
    sh = shardings or default_shardings()
    tally = RejectionTally()
    # Estimates kept for another amount of training move to this one when read (``candidates.amounts``).
    memo: dict[tuple[str, int, str | None], Read] = MovingMemo(workload)
    config_best, per_offer, feasible = cloud_candidates(
        workload, constraints, offers, runs=runs, estimator=estimator, shardings=sh,
        assumptions=a, quotas=quotas, tally=tally, memo=memo, screen=screen,
    )
    local = local_candidates(
        workload, constraints, builds, runs=runs, estimator=estimator, shardings=sh,
        assumptions=a, tally=tally, memo=memo,
    )
    ranked = _ranked(per_offer, local, runs, top, a, SpotOptions.of(constraints), rows)
    builds_ok = {c.instance_type for c in local}
    return CandidateSet(
        pareto=pareto([*config_best, *local]),
        ranked=ranked,
        rejected=tally,
        feasible_offers=feasible + len(builds_ok),
        estimates=len(memo),
    )


_COST_HOURS = itemgetter(0, 1)


def _ranked(
    per_offer: Sequence[tuple[float, float, Offer, str, _Config, Pricing]],
    local: Sequence[Candidate],
    runs: int,
    top: int,
    a: CostAssumptions,
    so: SpotOptions | None = None,
    rows: int | None = None,
) -> list[Candidate]:
    # Zones of one region show the same instance: keep the cheapest zone only.
    want = max(top * 4, top + 20)
    seen: set[tuple[str, str, str, int, str]] = set()
    out: list[Candidate] = []
    # With ``rows``: once that many are made, the rows whose cost could still sort among them (the
    # candidates recompute cost and hours within _ROW_SLACK, and order ties by key, not by row).
    edge: float | None = None
    # By (cost, hours), ties in the rows' order; ``itemgetter`` makes that key in C (~300 rows a quote).
    for cost, hours, o, gpu, cfg, p in heapq.nsmallest(want, per_offer, key=_COST_HOURS):
        if edge is not None and cost > edge:
            break  # dearer than every row kept, whatever the rounding: never shown
        k = (o.provider, o.region, o.instance_type, cfg.nodes, p)
        if k in seen:
            continue
        seen.add(k)
        out.append(_cloud_candidate(o, gpu, cfg, p, runs, a, so or SpotOptions()))
        if rows is not None and edge is None and len(out) >= rows:
            edge = cost + abs(cost) * 10 * _ROW_SLACK
    best_local: dict[str, Candidate] = {}
    for c in local:
        cur = best_local.get(c.instance_type)
        if cur is None or (c.cost_usd, c.hours) < (cur.cost_usd, cur.hours):
            best_local[c.instance_type] = c
    out.extend(best_local.values())
    out.sort(key=lambda c: (c.cost_usd, c.hours, c.key))
    # A little beyond ``top``, so the answer can still show the best of each kind (rent and buy).
    return out
