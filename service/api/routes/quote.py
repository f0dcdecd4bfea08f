from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from service.answers import quote_answer
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
    result = quote_answer(request, store)
    if format == "markdown":
        from service.render.markdown import quote_markdown

        return Response(quote_markdown(result), media_type="text/markdown")
    return result
