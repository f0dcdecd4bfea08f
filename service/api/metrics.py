"""What ``/metrics`` reports besides request counts: the route template of every request (answers
from the cache and FastAPI's own ``/openapi.json`` included), the process (memory, CPU, open
files: ``prometheus_client``'s ``ProcessCollector``), and how old each provider's prices are."""

from __future__ import annotations

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
    path = str(scope.get("path", ""))
    for prefix, candidate in _flatten(routes):
        if prefix and not path.startswith(prefix):
            continue
        if candidate.path_regex.match(path[len(prefix):]):
            return prefix + str(candidate.path)
    return UNMATCHED


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


def install_collectors(registry: CollectorRegistry, prices_as_of: Callable[[], dict[str, datetime] | None]) -> None:
    ProcessCollector(registry=registry)
    registry.register(PriceAge(prices_as_of))
