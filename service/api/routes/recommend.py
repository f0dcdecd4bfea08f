from __future__ import annotations

from fastapi import APIRouter

from optimizer.recommend import RecommendResult
from optimizer.recommend import recommend as run_recommend
from service.api.deps import StoreDep
from service.schemas import RecommendRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post("/recommend", response_model=RecommendResult)
def recommend(request: RecommendRequest, store: StoreDep) -> RecommendResult:
    """The cheapest balanced local build for the job, each part justified, next to the best rental."""
    from pricing.adapters.local import bundled_parts

    return run_recommend(
        request.workload,
        store.local_builds(),
        store.all_offers(),
        parts=list(bundled_parts()),
        budget_usd=request.budget_usd,
        deadline_hours=request.deadline_hours,
        runs_per_month=request.runs_per_month,
        prices_as_of=store.prices_as_of(),
        snapshot_id=store.snapshot_id(),
    )
