"""The HTTP application: ``create_app(settings)``, error mapping and metrics, all in one place."""

from __future__ import annotations

import importlib
import logging
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_fields_from_routes
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic.warnings import UnsupportedFieldAttributeWarning

from optimizer.deferred_models import build_deferred
from optimizer.errors import GpucostError, InvalidInput, ProviderError, SolverError, StoreError
from pricing.refresh import RefreshBusy
from service.api import quick_quote
from service.api.answer_cache import AnswerCache, StoreVersion
from service.api.balance import ProcessLoads
from service.api.deps import get_store_for
from service.api.limits import Limits, WorkStopped
from service.api.metrics import RouteTemplates, install_collectors
from service.api.middleware import GuardMiddleware
from service.api.redact import without_paths
from service.api.store_check import StoreCheck
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
    "runs",
    "quotas",
    "measurements",
    "web",
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
        return JSONResponse(status_code=502, content={"detail": without_paths(str(exc)), "provider": exc.provider})

    @app.exception_handler(RefreshBusy)
    async def _busy(_: Request, exc: RefreshBusy) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSONResponse:
        # Anonymous callers learn what is wrong, not where the server keeps its files.
        return JSONResponse(status_code=503, content={"detail": without_paths(str(exc))})

    @app.exception_handler(WorkStopped)
    async def _stopped(_: Request, exc: WorkStopped) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc), "time_limit_s": exc.limit_s})

    @app.exception_handler(GpucostError)
    async def _other(_: Request, exc: GpucostError) -> JSONResponse:
        logger.exception("unhandled gpucost error")
        return JSONResponse(status_code=500, content={"detail": without_paths(str(exc))})


def _install_metrics(app: FastAPI) -> Any:
    """Prometheus counters for the app; returns the observer the guard middleware calls."""
    # One registry per app: tests build many apps in one process.
    registry = CollectorRegistry()

    def prices_as_of() -> Any:
        store = app.state.store  # only a store already open: a scrape does not open or seed one
        return None if store is None else store.prices_as_of()

    install_collectors(registry, prices_as_of)
    requests = Counter(
        "gpucost_http_requests_total", "HTTP requests", ["method", "route", "status"], registry=registry
    )
    latency = Histogram(
        "gpucost_http_request_seconds", "HTTP request latency", ["method", "route"], registry=registry
    )
    app.state.metrics_registry = registry

    def observe(method: str, route: str, status: int, seconds: float) -> None:
        latency.labels(method, route).observe(seconds)
        requests.labels(method, route, str(status)).inc()

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return observe


def _solve_pool(settings: Settings) -> Any:
    """Worker processes for the solve lane, when asked for and the store is reachable by URL."""
    from sqlalchemy.engine import make_url

    if settings.solve_processes < 1:
        return None
    url = settings.db_url
    if url is not None and make_url(url).get_backend_name() == "sqlite" and make_url(url).database in (
        None, "", ":memory:"
    ):
        return None  # each process would see its own empty in-memory database
    from service.api.workers import SolvePool

    return SolvePool(settings, settings.solve_processes)


class GpucostApp(FastAPI):
    """FastAPI with ``GuardMiddleware`` outside everything, Starlette's error middleware included,
    so that every response, a 500 too, carries its ``X-Request-ID``."""

    guard_options: dict[str, Any]

    def build_middleware_stack(self) -> Any:
        return GuardMiddleware(super().build_middleware_stack(), **self.guard_options)


def create_app(settings: Settings | None = None, loads: ProcessLoads | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        handle = None
        if settings.refresh_cron:
            from service.api.deps import get_store_for
            from service.scheduler import start_scheduler, stop_scheduler

            handle = start_scheduler(settings, get_store_for(app))
        pool = app.state.solve_pool
        if pool is not None:
            import anyio

            try:
                await anyio.to_thread.run_sync(pool.warm)
            except Exception as exc:  # noqa: BLE001 - a damaged store must not stop the server: /readyz says it
                logger.warning("solve workers could not open the price store yet: %s", exc)
        try:
            yield
        finally:
            if pool is not None:
                pool.close()
            if handle is not None:
                stop_scheduler(handle)
            # The store this app opened is this app's to close (pooled connections included).
            store = getattr(app.state, "store", None)
            if store is not None:
                store.close()
                app.state.store = None

    if settings.refresh_cron:
        from service.scheduler import parse_cron

        parse_cron(settings.refresh_cron)  # a bad expression stops start-up, naming the variable

    app = GpucostApp(
        title="gpucost",
        version="0.1.0",
        description="Rent cloud GPU hours or buy a card? Estimates, sourced prices and an ILP decision.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.store = None
    # Read the price book and rates now: a missing or invalid file stops the server from starting.
    app.state.price_view = settings.price_view()
    _install_error_handlers(app)
    observe = _install_metrics(app)
    app.state.limits = Limits.from_settings(settings)
    app.state.answer_cache = AnswerCache() if settings.answer_cache else None

    store_version = StoreVersion(lambda: app.state.store)

    app.state.solve_pool = _solve_pool(settings)

    def solve_pool() -> Any:
        # Only while the store is the one the workers open too (a test may hand the app its own).
        store = app.state.store
        return app.state.solve_pool if store is not None and getattr(app.state, "store_by_url", False) else None

    app.guard_options = {
        "limits": app.state.limits, "max_body_bytes": settings.max_body_bytes, "observe": observe,
        "cache": app.state.answer_cache, "store_version": store_version.read,
        "version_if_unchanged": store_version.if_unchanged, "solve_pool": solve_pool,
        "store_check": StoreCheck(lambda: get_store_for(app)),
        "route_of": RouteTemplates(app.router.routes), "loads": loads,
    }
    for name in ROUTE_MODULES:
        module = importlib.import_module(f"service.api.routes.{name}")
        app.include_router(module.router)
    quick_quote.install(app)  # the plain JSON quote, first: FastAPI's route answers the rest
    # Models a CLI quote leaves unbuilt are built now, not by the first request that needs one.
    build_deferred()
    build_route_validators(app)
    return app


def build_route_validators(app: FastAPI) -> None:
    """Build the validators and serializers FastAPI made for the routes' bodies and answers.

    FastAPI wraps each in a ``TypeAdapter``, which follows its model's ``defer_build``: for a
    route whose model a CLI quote never uses (``optimizer.deferred_models``) it would be built by
    the route's first request, with a warning about the ``Field`` FastAPI wraps the model in. It
    is built here instead, that warning silenced as FastAPI's own set-up silences it. The adapter
    is a private attribute of FastAPI's ``ModelField``: ``test_cli_startup.py`` fails if a request
    still builds one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsupportedFieldAttributeWarning)
        for field in get_fields_from_routes(app.routes):
            adapter = getattr(field, "_type_adapter", None)
            if adapter is not None and not adapter.pydantic_complete:
                adapter.rebuild(force=True)
