"""Readiness and answers agree: a damaged store gets no decision answered from it.

``/readyz`` says 503 when the store is damaged (a table unreadable, SQLite's quick check failing,
a current price list holding fewer rows than it records, e.g. half its offers deleted). A quote
computed from such a store would be computed from half the offers and look like any other, so
the decision endpoints answer 503 with the same reason instead. The check reads every table, so
its result is kept for ``TTL_S`` seconds: under load the store is checked once per interval. Once
the store has been checked, requests never wait for the next check: they take the last answer
while it runs (``GuardMiddleware._store_problem``): the check takes 4-12 ms alone on the bundled
SQLite store (2026-12-01) and longer while quotes hold the interpreter, and every request that
arrived meanwhile used to wait for it, 429s included. A store damaged since the last check is so
refused one check later: within ``TTL_S`` plus one check.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from optimizer.errors import GpucostError
from service.api.redact import without_paths

logger = logging.getLogger(__name__)

TTL_S = 5.0
# The endpoints that answer from prices (an estimate does not read the store).
PRICED_PATHS = frozenset({"/v1/quote", "/v1/breakeven", "/v1/plan", "/v1/frontier", "/v1/recommend"})
_UNSET = object()


class StoreCheck:
    def __init__(self, store: Callable[[], Any], ttl_s: float = TTL_S) -> None:
        self._store = store
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._at = -1e18
        self._problem: str | None = None

    def cached(self) -> Any:
        """The last answer while it is fresh; ``UNSET`` when it must be read again (``check``)."""
        if time.monotonic() - self._at <= self.ttl_s:
            return self._problem
        return _UNSET

    def last(self) -> Any:
        """The last answer however old; ``UNSET`` before the first check."""
        return self._problem if self._at > -1e18 else _UNSET

    def check(self) -> str | None:
        """None when whole; else the reason in words, without filesystem paths. Blocking."""
        with self._lock:
            if time.monotonic() - self._at <= self.ttl_s:
                return self._problem
            self._problem = self._read()
            self._at = time.monotonic()
            return self._problem

    def _read(self) -> str | None:
        try:
            store = self._store()
            problems = getattr(store, "problems", None)
            found = problems() if problems is not None else []
        except GpucostError:
            return None  # cannot open it at all: the route's own 503 says so
        if not found:
            return None
        reason = "the price store is damaged: " + "; ".join(found)
        logger.warning("decisions refused: %s", reason)  # in full, paths too: for the operator
        return without_paths(reason)


UNSET = _UNSET
