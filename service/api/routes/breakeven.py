from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from optimizer.breakeven import BreakevenResult
from service.answers import breakeven_answer
from service.api.deps import StoreDep
from service.schemas import BreakevenRequest

router = APIRouter(prefix="/v1", tags=["decide"])


@router.post(
    "/breakeven",
    response_model=BreakevenResult,
    responses={200: {"content": {"image/png": {}, "image/svg+xml": {}, "text/markdown": {}}}},
)
def breakeven(
    request: BreakevenRequest, store: StoreDep, format: Literal["json", "png", "svg", "markdown"] = "json"
) -> BreakevenResult | Response:
    """Rent vs buy for one workload at a cadence; ``?format=png|svg`` returns the cumulative-cost chart."""
    result = breakeven_answer(request, store)
    if format == "json":
        return result
    if format == "markdown":
        from service.render.markdown import breakeven_markdown

        return Response(breakeven_markdown(result), media_type="text/markdown")
    from service.render.charts import MEDIA_TYPES, breakeven_chart

    return Response(breakeven_chart(result, format), media_type=MEDIA_TYPES[format])
