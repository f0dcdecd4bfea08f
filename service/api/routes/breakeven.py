from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from optimizer.breakeven import BreakevenResult
from service.answers import breakeven_answer
from service.api.deps import StoreDep
from service.api.negotiate import chosen_format, openapi_content, respond
from service.schemas import BreakevenRequest

router = APIRouter(prefix="/v1", tags=["decide"])

FormatQuery = Annotated[
    Literal["json", "png", "svg", "markdown"] | None, Query(description="default: from Accept, else json")
]


@router.post("/breakeven", response_model=BreakevenResult, responses=openapi_content("png", "svg", "markdown"))
def breakeven(
    request: BreakevenRequest, store: StoreDep, http: Request, format: FormatQuery = None
) -> BreakevenResult | Response:
    """Rent vs buy for one workload at a cadence; ``?format=png|svg`` returns the cumulative-cost chart,
    ``?format=markdown`` a section for planning documents."""
    from service.render.markdown import breakeven_markdown

    fmt = chosen_format(format, http, ("json", "markdown", "png", "svg"))
    result = breakeven_answer(request, store)
    if fmt in ("png", "svg"):
        from service.render.charts import breakeven_chart  # matplotlib: only when a chart is asked for

        return respond(result, fmt, breakeven_markdown, breakeven_chart)
    return respond(result, fmt, breakeven_markdown)
