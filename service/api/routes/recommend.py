from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from optimizer.recommend import RecommendResult
from service.answers import recommend_answer
from service.api.deps import SettingsDep, StoreDep
from service.api.negotiate import chosen_format, openapi_content, respond
from service.schemas import RecommendRequest

router = APIRouter(prefix="/v1", tags=["decide"])

FormatQuery = Annotated[Literal["json", "markdown"] | None, Query(description="default: from Accept, else json")]


@router.post("/recommend", response_model=RecommendResult, responses=openapi_content("markdown"))
def recommend(
    request: RecommendRequest, store: StoreDep, settings: SettingsDep, http: Request, format: FormatQuery = None
) -> RecommendResult | Response:
    """The cheapest balanced local build for the job, each part justified, next to the best rental."""
    from service.render.markdown import recommend_markdown

    result = recommend_answer(request, store, settings)
    fmt = chosen_format(format, http, ("json", "markdown"))
    return respond(result, fmt, recommend_markdown)  # type: ignore[return-value]
