"""The web page: ``GET /`` and its bundled scripts and styles under ``/static/``."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Response

from service.web import STATIC_FILES, static_file

router = APIRouter(include_in_schema=False)

# The page is small and changes with the package; revalidating keeps an upgraded server's page fresh.
_CACHE = {"cache-control": "no-cache"}


@router.get("/")
def index() -> Response:
    return Response(static_file("index.html"), media_type=STATIC_FILES["index.html"], headers=_CACHE)


@router.get("/static/{name}")
def asset(name: str) -> Response:
    if name not in STATIC_FILES or name == "index.html":
        raise HTTPException(status_code=404, detail=f"no such file: {name}")
    return Response(static_file(name), media_type=STATIC_FILES[name], headers=_CACHE)
