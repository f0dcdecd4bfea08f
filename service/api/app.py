"""The HTTP application: ``create_app(settings)``, error mapping and metrics, all in one place."""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from optimizer.errors import GpucostError, InvalidInput, ProviderError, SolverError, StoreError
from pricing.refresh import RefreshBusy
from service.settings import Settings, get_settings

logger = logging.getLogger(__name__)

# Route modules, each exposing ``router``. Listed, not discovered, so a typo fails loudly.
ROUTE_MODULES = (
    "health",
    "catalog",
    "estimate",
    "prices",
    "quote",
    "breakeven",
    "plan",
    "recommend",
    "frontier",
)


_LOC_ROOTS = ("body", "query", "path", "header")


def _field_loc(field: str) -> list[str | int]:
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in field.split(".") if p]
    return parts if parts and parts[0] in _LOC_ROOTS else ["body", *parts]


def _invalid(detail: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(detail)})


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(InvalidInput)
    async def _invalid_input(_: Request, exc: InvalidInput) -> JSONResponse:
        return _invalid([{"loc": _field_loc(exc.field), "msg": exc.reason, "type": "value_error"}])

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        # Pydantic's detail can hold the offending input (ctx objects too): keep loc, msg, type.
        detail = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in exc.errors()
        ]
        return _invalid(detail)

    @app.exception_handler(SolverError)
    async def _solver(_: Request, exc: SolverError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc), "status": exc.status})

    @app.exception_handler(ProviderError)
    async def _provider(_: Request, exc: ProviderError) -> JSONResponse:
        return JSONResponse(status_code=502, content={"detail": str(exc), "provider": exc.provider})

    @app.exception_handler(RefreshBusy)
    async def _busy(_: Request, exc: RefreshBusy) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    @app.exception_handler(GpucostError)
    async def _other(_: Request, exc: GpucostError) -> JSONResponse:
        logger.exception("unhandled gpucost error")
        return JSONResponse(status_code=500, content={"detail": str(exc)})


def _install_metrics(app: FastAPI) -> None:
    # One registry per app: tests build many apps in one process.
    registry = CollectorRegistry()
    requests = Counter(
        "gpucost_http_requests_total", "HTTP requests", ["method", "route", "status"], registry=registry
    )
    latency = Histogram(
        "gpucost_http_request_seconds", "HTTP request latency", ["method", "route"], registry=registry
    )
    app.state.metrics_registry = registry

    @app.middleware("http")
    async def _observe(request: Request, call_next: Any) -> Response:
        start = time.perf_counter()
        response: Response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        latency.labels(request.method, path).observe(time.perf_counter() - start)
        requests.labels(request.method, path, str(response.status_code)).inc()
        return response

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        handle = None
        if settings.refresh_cron:
            from service.api.deps import get_store_for
            from service.scheduler import start_scheduler, stop_scheduler

            handle = start_scheduler(settings, get_store_for(app))
        try:
            yield
        finally:
            if handle is not None:
                stop_scheduler(handle)
            # The store this app opened is this app's to close (pooled connections included).
            store = getattr(app.state, "store", None)
            if store is not None:
                store.close()
                app.state.store = None

    app = FastAPI(
        title="gpucost",
        version="0.1.0",
        description="Rent cloud GPU hours or buy a card? Estimates, sourced prices and an ILP decision.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.store = None
    _install_error_handlers(app)
    _install_metrics(app)
    for name in ROUTE_MODULES:
        module = importlib.import_module(f"service.api.routes.{name}")
        app.include_router(module.router)
    return app
