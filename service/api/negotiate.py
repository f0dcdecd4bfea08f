"""Which representation a decision endpoint answers with: ``?format=`` first, then ``Accept``.

Every decision endpoint returns JSON by default and Markdown on ``?format=markdown`` or
``Accept: text/markdown``; chart endpoints also draw PNG or SVG. An explicit ``format`` wins over
the header because a link or a curl line is easier to read than a header, and a browser's default
``Accept`` (``text/html, ..., */*``) must keep getting JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from fastapi import Request, Response
from pydantic import BaseModel

Format = Literal["json", "markdown", "png", "svg"]

MEDIA_TYPES: dict[str, str] = {
    "json": "application/json",
    "markdown": "text/markdown",
    "png": "image/png",
    "svg": "image/svg+xml",
}
_BY_MEDIA = {v: k for k, v in MEDIA_TYPES.items()}


def _accepted(header: str) -> list[tuple[float, int, str]]:
    """``(q, position, media type)`` for each media range of an Accept header."""
    ranges = []
    for pos, item in enumerate(header.split(",")):
        media, *params = (p.strip() for p in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            ranges.append((q, pos, media.lower()))
    return ranges


def chosen_format(fmt: str | None, request: Request, allowed: Sequence[str]) -> str:
    """The format to answer in: ``fmt`` if given, else the best of ``allowed`` the Accept header
    names (ties go to the earlier range), else JSON."""
    if fmt is not None:
        return fmt
    best: tuple[float, int] | None = None
    choice = "json"
    for q, pos, media in _accepted(request.headers.get("accept", "")):
        name = _BY_MEDIA.get(media)
        if name is None or name not in allowed or q <= 0:
            continue
        if best is None or (q, -pos) > (best[0], -best[1]):
            best, choice = (q, pos), name
    return choice


def openapi_content(*formats: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry documenting the non-JSON representations of a 200."""
    content: dict[str, Any] = {}
    for f in formats:
        schema = {"type": "string"} if f == "markdown" else {"type": "string", "format": "binary"}
        content[MEDIA_TYPES[f]] = {"schema": schema}
    return {200: {"content": content}}


def respond(
    result: BaseModel,
    fmt: str,
    markdown: Callable[[Any], str],
    chart: Callable[[Any, Any], bytes] | None = None,
) -> BaseModel | Response:
    """``result`` as JSON (the response model), Markdown, or the chart drawn in ``fmt``."""
    if fmt == "json":
        # Serialised here, once: the result is already its response model, and FastAPI would
        # dump it, validate it again and dump it once more (for a sync route, on a worker thread).
        return Response(result.model_dump_json(), media_type=MEDIA_TYPES["json"])
    if fmt == "markdown":
        return Response(markdown(result), media_type="text/markdown; charset=utf-8")
    if chart is None:  # guarded by the route's Literal; kept for a route that forgets
        raise ValueError(f"no chart for format {fmt}")
    return Response(chart(result, fmt), media_type=MEDIA_TYPES[fmt])
