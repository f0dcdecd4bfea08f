"""The price store: SQLAlchemy tables, Alembic migrations and ``PriceStore``."""

from pricing.store.repository import PriceStore, SnapshotInfo, open_store

__all__ = ["PriceStore", "SnapshotInfo", "open_store"]
