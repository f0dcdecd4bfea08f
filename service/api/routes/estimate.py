from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from service.answers import estimate_answer
from service.api.negotiate import chosen_format, openapi_content, respond
from service.schemas import Estimate, EstimateRequest

router = APIRouter(prefix="/v1", tags=["estimate"])

FormatQuery = Annotated[Literal["json", "markdown"] | None, Query(description="default: from Accept, else json")]


@router.post("/estimate", response_model=Estimate, responses=openapi_content("markdown"))
def estimate(request: EstimateRequest, http: Request, format: FormatQuery = None) -> Estimate | Response:
    """Peak VRAM per GPU by part, host needs, throughput and hours; ``?format=markdown`` as a section."""
    from service.render.markdown import estimate_markdown

    from service.measurements import measurements_for_app

    # Stored measurements of this recipe replace or scale the model's figures (basis).
    result = estimate_answer(request, measurements_for_app(http.app))
    fmt = chosen_format(format, http, ("json", "markdown"))
    return respond(result, fmt, estimate_markdown)  # type: ignore[return-value]
