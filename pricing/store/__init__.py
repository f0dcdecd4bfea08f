"""The price store: SQLAlchemy tables, Alembic migrations and ``PriceStore``.

The names below load on first use, so ``pricing.store.peek`` (what a reader learns without
SQLAlchemy) can be imported without the ORM."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pricing.store.repository import PriceStore, SnapshotInfo, open_store

__all__ = ["PriceStore", "SnapshotInfo", "open_store"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pricing.store import repository

        return getattr(repository, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
