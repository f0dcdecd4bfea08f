"""The cost/time frontier of one job: what a faster answer costs.

Each point is a candidate no other candidate beats on both wall hours and cost. Read left to
right: every step buys fewer hours for more money.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from pydantic import BaseModel

from optimizer.candidates import CostAssumptions, Estimator, ShardingChoices, default_estimator, generate
from optimizer.estimator.workload import Constraints, Workload
from optimizer.explain import rejected_groups, to_option
from optimizer.offer import LocalBuild, Offer
from optimizer.results import Option, RejectedGroup


class FrontierPoint(BaseModel):
    hours: float
    cost_usd: float
    usd_per_hour_saved: float | None  # vs the next slower point; None for the slowest
    option: Option


class FrontierResult(BaseModel):
    points: list[FrontierPoint]  # fastest first
    rejected: list[RejectedGroup]
    runs: int
    prices_as_of: dict[str, datetime]
    snapshot_id: str


def frontier(
    workload: Workload,
    constraints: Constraints,
    offers: Iterable[Offer],
    builds: Iterable[LocalBuild],
    *,
    runs: int = 1,
    prices_as_of: Mapping[str, datetime],
    snapshot_id: str,
    estimator: Estimator | None = None,
    shardings: ShardingChoices | None = None,
    assumptions: CostAssumptions | None = None,
    quotas: Mapping[str, int] | None = None,
) -> FrontierResult:
    cs = generate(
        workload, constraints, offers, builds,
        runs=runs, top=1, estimator=estimator or default_estimator(), shardings=shardings,
        assumptions=assumptions, quotas=quotas,
    )
    pts = cs.pareto  # sorted by hours ascending, cost strictly descending
    points: list[FrontierPoint] = []
    for k, c in enumerate(pts):
        slower = pts[k + 1] if k + 1 < len(pts) else None
        rate = None
        if slower is not None and slower.hours > c.hours:
            rate = (c.cost_usd - slower.cost_usd) / (slower.hours - c.hours)
        points.append(
            FrontierPoint(
                hours=round(c.hours, 4),
                cost_usd=round(c.cost_usd, 4),
                usd_per_hour_saved=round(rate, 4) if rate is not None else None,
                option=to_option(c),
            )
        )
    return FrontierResult(
        points=points,
        rejected=rejected_groups(cs.rejected),
        runs=runs,
        prices_as_of=dict(prices_as_of),
        snapshot_id=snapshot_id,
    )
