from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from optimizer.frontier import FrontierResult
from service.answers import frontier_answer
from service.api.deps import StoreDep
from service.schemas import QuoteRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post(
    "/frontier",
    response_model=FrontierResult,
    responses={200: {"content": {"image/png": {}, "image/svg+xml": {}, "text/markdown": {}}}},
)
def frontier(
    request: QuoteRequest, store: StoreDep, format: Literal["json", "png", "svg", "markdown"] = "json"
) -> FrontierResult | Response:
    """The Pareto set of (hours, cost) for one job; ``?format=png|svg`` draws it."""
    result = frontier_answer(request, store)
    if format == "json":
        return result
    if format == "markdown":
        from service.render.markdown import frontier_markdown

        return Response(frontier_markdown(result), media_type="text/markdown")
    from service.render.charts import MEDIA_TYPES, frontier_chart

    return Response(frontier_chart(result, format), media_type=MEDIA_TYPES[format])
