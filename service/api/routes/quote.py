from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from optimizer.quote import quote as run_quote
from service.api.deps import StoreDep
from service.schemas import Quote, QuoteRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post("/quote", response_model=Quote, responses={200: {"content": {"text/markdown": {}}}})
def quote(
    request: QuoteRequest, store: StoreDep, format: Literal["json", "markdown"] = "json"
) -> Quote | Response:
    """Cheapest feasible option for ``runs`` runs of one job, alternatives, fastest, rejections.

    ``?format=markdown`` returns the same answer as a Markdown section for planning documents.
    """
    result = run_quote(
        request.workload,
        request.constraints,
        store.all_offers(),
        store.local_builds(),
        runs=request.runs,
        top=request.top,
        prices_as_of=store.prices_as_of(),
        snapshot_id=store.snapshot_id(),
    )
    if format == "markdown":
        from service.render.markdown import quote_markdown

        return Response(quote_markdown(result), media_type="text/markdown")
    return result
