from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from optimizer.plan import PlanResult
from service.answers import plan_answer
from service.api.deps import StoreDep
from service.api.negotiate import chosen_format, openapi_content, respond
from service.schemas import PlanRequest

router = APIRouter(prefix="/v1", tags=["decide"])

FormatQuery = Annotated[
    Literal["json", "png", "svg", "markdown"] | None, Query(description="default: from Accept, else json")
]


@router.post("/plan", response_model=PlanResult, responses=openapi_content("png", "svg", "markdown"))
def plan(request: PlanRequest, store: StoreDep, http: Request, format: FormatQuery = None) -> PlanResult | Response:
    """What to buy and when, and where each job runs each month, over the horizon; ``?format=png|svg``
    draws the monthly cost (bought vs rented) and the cumulative cost against all-cloud."""
    from service.render.markdown import plan_markdown

    fmt = chosen_format(format, http, ("json", "markdown", "png", "svg"))
    result = plan_answer(request, store)
    if fmt in ("png", "svg"):
        from service.render.charts import plan_chart

        return respond(result, fmt, plan_markdown, plan_chart)
    return respond(result, fmt, plan_markdown)
