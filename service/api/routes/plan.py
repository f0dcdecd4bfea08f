from __future__ import annotations

from fastapi import APIRouter

from optimizer.plan import PlanResult
from service.answers import plan_answer
from service.api.deps import StoreDep
from service.schemas import PlanRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post("/plan", response_model=PlanResult)
def plan(request: PlanRequest, store: StoreDep) -> PlanResult:
    """What to buy and when, and where each job runs each month, over the horizon."""
    return plan_answer(request, store)
