"""What ``/metrics`` reports besides request counts: the route template of every request (answers
from the cache and FastAPI's own ``/openapi.json`` included), the process (memory, CPU, open
files: ``prometheus_client``'s ``ProcessCollector``), and how old each provider's prices are."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

UNMATCHED = "unmatched"


def _flatten(routes: Iterable[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(prefix, route) for every route, through FastAPI's wrappers of included routers."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            extra = getattr(getattr(route, "include_context", None), "prefix", "") or ""
            yield from _flatten(inner.routes, prefix + extra)
        elif getattr(route, "path_regex", None) is not None:
            yield prefix, route


def route_template(routes: Iterable[Any], scope: MutableMapping[str, Any]) -> str:
    """The template (``/static/{name}``) of the route that serves ``scope``'s path (whatever its
    method); ``unmatched`` for paths no route serves, so a scan of random URLs cannot grow the
    label set."""
    route = scope.get("route")
    if route is not None and getattr(route, "path", None):
        return str(route.path)
    return _match(list(_flatten(routes)), str(scope.get("path", "")))


def _match(flat: list[tuple[str, Any]], path: str) -> str:
    for prefix, candidate in flat:
        if prefix and not path.startswith(prefix):
            continue
        if candidate.path_regex.match(path[len(prefix):]):
            return prefix + str(candidate.path)
    return UNMATCHED


class RouteTemplates:
    """``route_template`` for every request the middleware answers itself (429s, cache hits):
    the routes flattened once (again when routes are added), the templates of the last
    ``most`` paths kept, so a burst of refusals does not walk the route tree once each (it was
    about 40 % of a refused request's time in the middleware, 2026-12-01)."""

    def __init__(self, routes: list[Any], most: int = 1024) -> None:
        self._routes = routes
        self._most = most
        self._flat: list[tuple[str, Any]] = []
        self._seen = -1
        self._known: dict[str, str] = {}

    def __call__(self, scope: MutableMapping[str, Any]) -> str:
        route = scope.get("route")
        if route is not None and getattr(route, "path", None):
            return str(route.path)
        path = str(scope.get("path", ""))
        if len(self._routes) != self._seen:
            self._flat, self._seen, self._known = list(_flatten(self._routes)), len(self._routes), {}
        known = self._known.get(path)
        if known is not None:
            return known
        template = _match(self._flat, path)
        if len(self._known) < self._most:  # random URLs cannot grow it past its bound
            self._known[path] = template
        return template


class PriceAge(Collector):
    """``gpucost_prices_age_seconds{provider}``: seconds since each provider's current prices
    were true (their ``as_of``), read from the store at each scrape; nothing while it is closed."""

    def __init__(self, prices_as_of: Callable[[], dict[str, datetime] | None]) -> None:
        self._prices_as_of = prices_as_of

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gpucost_prices_age_seconds", "Seconds since each provider's current prices were true (as_of)",
            labels=["provider"],
        )
        try:
            as_of = self._prices_as_of() or {}
        except Exception:  # noqa: BLE001 - a scrape must not fail because the store does: /readyz says it
            as_of = {}
        now = time.time()
        for provider, stamp in sorted(as_of.items()):
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            family.add_metric([provider], max(0.0, now - stamp.timestamp()))
        yield family


class FrozenHeap(Collector):
    """``gpucost_heap_frozen_objects``: objects moved out of the cycle collector's walk
    (``service.api.heap``); in a served process, everything that outlived the last request."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from service.api.heap import frozen_objects

        yield GaugeMetricFamily("gpucost_heap_frozen_objects",
                                "Objects the cycle collector no longer walks (gc.freeze)", value=frozen_objects())


class SwitchInterval(Collector):
    """``gpucost_switch_interval_seconds``: how long a thread computing an answer may keep Python's
    lock while the event loop waits for it (``service.api.switching``), in the process scraped."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("gpucost_switch_interval_seconds",
                                "Python's thread switch interval in this process (sys.getswitchinterval)",
                                value=sys.getswitchinterval())


def install_collectors(registry: CollectorRegistry, prices_as_of: Callable[[], dict[str, datetime] | None]) -> None:
    ProcessCollector(registry=registry)
    registry.register(PriceAge(prices_as_of))
    registry.register(FrozenHeap())
    registry.register(SwitchInterval())
