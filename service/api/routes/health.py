"""Liveness and readiness: both on the event loop, so no amount of other work delays them.

``/healthz``: the process answers. ``/readyz``: the price store opens, is whole (every table
readable, SQLite's quick check passes, current price lists hold the rows they record) and holds
prices. The store check runs on a thread of its own and its answer is kept for a few seconds, so
probes every second cost one check per interval, not one each.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from optimizer.errors import GpucostError
from service.api.redact import without_paths

router = APIRouter(tags=["health"])
logger = logging.getLogger(__name__)

READY_TTL_S = 5.0
# Its own thread: a server pool busy with expensive requests must not delay the probe.
_limiter = anyio.CapacityLimiter(1)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def readiness_problem(app: Any) -> str | None:
    """None when ready; else the reason, in words (the store's own, never a traceback)."""
    from service.api.deps import get_store_for

    try:
        store = get_store_for(app)
        store.ensure_seeded()
        problems = store.problems()
        if problems:
            return "the price store is damaged: " + "; ".join(problems)
        if not store.has_prices():
            return "the price store holds no prices"
    except GpucostError as exc:
        return str(exc)
    return None


class _ReadyCache:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at = -1e9
        self.problem: str | None = None

    def get(self, app: Any) -> str | None:
        with self.lock:
            if time.monotonic() - self.at > READY_TTL_S:
                problem = readiness_problem(app)
                if problem and problem != self.problem:
                    logger.warning("not ready: %s", problem)  # in full, paths too: for the operator
                self.problem = problem
                self.at = time.monotonic()
            return self.problem


@router.get(
    "/readyz",
    responses={503: {"description": "not ready: the store is unreachable, damaged or empty"}},
)
async def readyz(request: Request) -> JSONResponse:
    app = request.app
    cache = getattr(app.state, "ready_cache", None)
    if cache is None:
        cache = app.state.ready_cache = _ReadyCache()
    problem = await anyio.to_thread.run_sync(cache.get, app, limiter=_limiter)
    if problem:
        # No filesystem paths to anonymous callers: the operator has them in the logs.
        return JSONResponse(status_code=503, content={"status": "unavailable", "reason": without_paths(problem)})
    return JSONResponse(content={"status": "ready"})
