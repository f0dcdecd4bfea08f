from __future__ import annotations

from fastapi import APIRouter

from optimizer.recommend import RecommendResult
from service.answers import recommend_answer
from service.api.deps import SettingsDep, StoreDep
from service.schemas import RecommendRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post("/recommend", response_model=RecommendResult)
def recommend(request: RecommendRequest, store: StoreDep, settings: SettingsDep) -> RecommendResult:
    """The cheapest balanced local build for the job, each part justified, next to the best rental."""
    return recommend_answer(request, store, settings)
