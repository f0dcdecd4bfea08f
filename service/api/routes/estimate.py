from __future__ import annotations

from fastapi import APIRouter

from service.answers import estimate_answer
from service.schemas import Estimate, EstimateRequest

router = APIRouter(prefix="/v1", tags=["estimate"])


@router.post("/estimate", response_model=Estimate)
def estimate(request: EstimateRequest) -> Estimate:
    return estimate_answer(request)
