"""``steady_read``: a store read kept while nothing is committed to the store (``PriceStore.steady``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def steady_read(store: object, name: str, read: Callable[[], T]) -> T:
    """``store.steady(name, read)`` where the store keeps reads (a ``PriceStore``), else ``read()``.
    What it gives back is shared: keep only values no caller changes (frozen ones, or rows)."""
    steady = getattr(store, "steady", None)
    return steady(name, read) if callable(steady) else read()
