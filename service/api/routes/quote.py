from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response

from service.answers import quote_answer
from service.api.deps import StoreDep
from service.api.negotiate import chosen_format, openapi_content, respond
from service.schemas import Quote, QuoteRequest

router = APIRouter(prefix="/v1", tags=["decide"])

FormatQuery = Annotated[Literal["json", "markdown"] | None, Query(description="default: from Accept, else json")]


@router.post("/quote", response_model=Quote, responses=openapi_content("markdown"))
def quote(request: QuoteRequest, store: StoreDep, http: Request, format: FormatQuery = None) -> Quote | Response:
    """Cheapest feasible option for ``runs`` runs of one job, alternatives, fastest, rejections.

    ``?format=markdown`` (or ``Accept: text/markdown``) returns the same answer as a Markdown
    section for planning documents.
    """
    from service.render.markdown import quote_markdown

    result = quote_answer(request, store)
    fmt = chosen_format(format, http, ("json", "markdown"))
    return respond(result, fmt, quote_markdown)  # type: ignore[return-value]
