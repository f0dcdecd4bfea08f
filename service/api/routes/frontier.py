from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from optimizer.frontier import FrontierResult
from service.answers import frontier_answer
from service.api.deps import StoreDep
from service.api.negotiate import chosen_format, openapi_content, respond
from service.schemas import QuoteRequest

router = APIRouter(prefix="/v1", tags=["decide"])

FormatQuery = Annotated[
    Literal["json", "png", "svg", "markdown"] | None, Query(description="default: from Accept, else json")
]


@router.post("/frontier", response_model=FrontierResult, responses=openapi_content("png", "svg", "markdown"))
def frontier(
    request: QuoteRequest, store: StoreDep, http: Request, format: FormatQuery = None
) -> FrontierResult | Response:
    """The Pareto set of (hours, cost) for one job; ``?format=png|svg`` draws it."""
    from service.render.markdown import frontier_markdown

    fmt = chosen_format(format, http, ("json", "markdown", "png", "svg"))
    result = frontier_answer(request, store)
    if fmt in ("png", "svg"):
        from service.render.charts import frontier_chart

        return respond(result, fmt, frontier_markdown, frontier_chart)
    return respond(result, fmt, frontier_markdown)
