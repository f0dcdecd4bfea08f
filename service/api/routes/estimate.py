from __future__ import annotations

from fastapi import APIRouter

from optimizer.estimate import estimate as run_estimate
from service.schemas import Estimate, EstimateRequest

router = APIRouter(prefix="/v1", tags=["estimate"])


@router.post("/estimate", response_model=Estimate)
def estimate(request: EstimateRequest) -> Estimate:
    return run_estimate(request.workload, request.gpu, request.gpu_count)
