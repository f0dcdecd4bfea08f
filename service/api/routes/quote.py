from __future__ import annotations

from fastapi import APIRouter

from optimizer.quote import quote as run_quote
from service.api.deps import StoreDep
from service.schemas import Quote, QuoteRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post("/quote", response_model=Quote)
def quote(request: QuoteRequest, store: StoreDep) -> Quote:
    """Cheapest feasible option for ``runs`` runs of one job, alternatives, fastest, rejections."""
    return run_quote(
        request.workload,
        request.constraints,
        store.all_offers(),
        store.local_builds(),
        runs=request.runs,
        top=request.top,
        prices_as_of=store.prices_as_of(),
        snapshot_id=store.snapshot_id(),
    )
