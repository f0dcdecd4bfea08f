from __future__ import annotations

from fastapi import APIRouter

from optimizer.plan import PlanResult
from optimizer.plan import plan as run_plan
from service.api.deps import StoreDep
from service.schemas import PlanRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post("/plan", response_model=PlanResult)
def plan(request: PlanRequest, store: StoreDep) -> PlanResult:
    """What to buy and when, and where each job runs each month, over the horizon."""
    return run_plan(
        request.jobs,
        request.horizon_months,
        request.constraints,
        store.all_offers(),
        store.local_builds(),
        capex_budget_usd=request.capex_budget_usd,
        prices_as_of=store.prices_as_of(),
        snapshot_id=store.snapshot_id(),
        time_limit_s=request.time_limit_s,
    )
