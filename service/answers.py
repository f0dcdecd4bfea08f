"""Each answer the service gives, computed in one place for both front ends.

A route and a CLI command differ only in how they read the request and show the result; what
they compute is ``<name>_answer(request, store)`` here, so the CLI's ``--json`` and the HTTP
response cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from optimizer.breakeven import BreakevenResult, breakeven
from optimizer.errors import ProviderError
from optimizer.estimator.estimate import estimate
from optimizer.frontier import FrontierResult, frontier
from optimizer.plan import PlanResult, plan
from optimizer.quote import quote
from optimizer.recommend import RecommendResult, recommend
from pricing.offer import Part
from service.schemas import (
    BreakevenRequest,
    Estimate,
    EstimateRequest,
    PlanRequest,
    Quote,
    QuoteRequest,
    RecommendRequest,
)
from service.settings import Settings

if TYPE_CHECKING:
    from pricing.store.repository import PriceStore


def estimate_answer(req: EstimateRequest) -> Estimate:
    return estimate(req.workload, req.gpu, req.gpu_count)


def quote_answer(req: QuoteRequest, store: PriceStore) -> Quote:
    return quote(
        req.workload, req.constraints, store.all_offers(), store.local_builds(),
        runs=req.runs, top=req.top, prices_as_of=store.prices_as_of(), snapshot_id=store.snapshot_id(),
    )


def frontier_answer(req: QuoteRequest, store: PriceStore) -> FrontierResult:
    return frontier(
        req.workload, req.constraints, store.all_offers(), store.local_builds(), runs=req.runs,
        prices_as_of=store.prices_as_of(), snapshot_id=store.snapshot_id(),
    )


def breakeven_answer(req: BreakevenRequest, store: PriceStore) -> BreakevenResult:
    builds = [store.local_build(req.buy.build)] if req.buy.build else store.local_builds()
    return breakeven(
        req.workload, req.rent, req.buy, store.all_offers(), builds,
        runs_per_month=req.runs_per_month, horizon_months=req.horizon_months,
        electricity_usd_per_kwh=req.electricity_usd_per_kwh,
        prices_as_of=store.prices_as_of(), snapshot_id=store.snapshot_id(),
    )


def plan_answer(req: PlanRequest, store: PriceStore) -> PlanResult:
    return plan(
        req.jobs, req.horizon_months, req.constraints, store.all_offers(), store.local_builds(),
        capex_budget_usd=req.capex_budget_usd, prices_as_of=store.prices_as_of(),
        snapshot_id=store.snapshot_id(), time_limit_s=req.time_limit_s,
    )


def parts_catalog(settings: Settings) -> list[Part]:
    """The parts builds are composed from: the user's parts file if set, else the bundled one
    (the same choice the local-builds source makes)."""
    from pricing.adapters.local import bundled_parts, parts_from_csv

    if not settings.parts_file:
        return list(bundled_parts())
    try:
        text = Path(settings.parts_file).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProviderError("local", f"cannot read parts file {settings.parts_file}: {exc.strerror or exc}") from None
    return list(parts_from_csv(text))


def recommend_answer(req: RecommendRequest, store: PriceStore, settings: Settings) -> RecommendResult:
    return recommend(
        req.workload, store.local_builds(), store.all_offers(), parts=parts_catalog(settings),
        budget_usd=req.budget_usd, deadline_hours=req.deadline_hours, runs_per_month=req.runs_per_month,
        prices_as_of=store.prices_as_of(), snapshot_id=store.snapshot_id(),
    )
