"""Measurements in the price store: add, list, remove, and a version that changes with each.

A record is checked (``optimizer.measurement.checked``) before it gets here; its id is a digest
of its content, so adding the same record twice stores it once. Every change writes a new
``measurements_version`` into ``store_meta``: the HTTP answer cache keys on it, so a cached quote
is never served after a measurement that changes it was added or removed.

``pricing.store.measurement_peek`` reads them without SQLAlchemy, for the CLI's fast paths.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, delete, func, select

from optimizer.measurement import Measurement
from pricing.store.measurement_peek import (
    MAX_MEASUREMENTS,
    MEASUREMENTS_SQL,
    measurements_from,
)
from pricing.store.rows import _meta
from pricing.store.schema import MeasurementRow
from pricing.store.steady import steady_read

VERSION_KEY = "measurements_version"
_VERSION_SQL = f"SELECT value FROM store_meta WHERE key = '{VERSION_KEY}'"
_table = MeasurementRow.__table__


class _Store(Protocol):
    engine: Engine

    def _read(self) -> Any: ...
    def _write(self) -> Any: ...
    def _upsert(self, conn: Connection, table: Any) -> Any: ...


def _bump(store: _Store, conn: Connection) -> None:
    stmt = store._upsert(conn, _meta).values(key=VERSION_KEY, value=uuid.uuid4().hex)
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": stmt.excluded.value}))


def add_measurement(store: _Store, m: Measurement) -> tuple[Measurement, bool]:
    """Store ``m`` (checked, with its id); returns it and whether it was new."""
    assert m.id is not None
    with store._write() as conn:
        if conn.execute(select(_table.c.id).where(_table.c.id == m.id)).first() is not None:
            return m, False
        count = conn.execute(select(func.count()).select_from(_table)).scalar_one()
        if count >= MAX_MEASUREMENTS:
            from optimizer.errors import InvalidInput

            raise InvalidInput("measurement", f"the store holds {MAX_MEASUREMENTS} measurements; remove some first")
        conn.execute(_table.insert().values(
            id=m.id, gpu=m.gpu, gpu_count=m.gpu_count, source=m.source, fits=m.fits,
            measured_at=m.measured_at, created_at=datetime.now(UTC), record=m.model_dump(mode="json"),
        ))
        _bump(store, conn)
    return m, True


def list_measurements(store: _Store) -> list[Measurement]:
    """Every stored measurement, newest measurement first."""
    # Plain SQL: every answer reads this, and the Core statement costs twice as much.
    def read() -> tuple[Measurement, ...]:
        with store._read() as conn:
            return tuple(measurements_from(conn.exec_driver_sql(MEASUREMENTS_SQL).fetchall()))

    # Every answer reads them; kept while nothing is committed (measurements are frozen models).
    return list(steady_read(store, "measurements", read))


def remove_measurement(store: _Store, measurement_id: str) -> bool:
    """Remove one measurement; False when there was none of that id."""
    with store._write() as conn:
        gone = conn.execute(delete(_table).where(_table.c.id == measurement_id)).rowcount
        if gone:
            _bump(store, conn)
    return bool(gone)


def measurements_version(store: _Store) -> str:
    """Changes whenever a measurement is added or removed ("0" before the first)."""
    with store._read() as conn:  # plain SQL: the HTTP answer cache asks this every request
        row = conn.exec_driver_sql(_VERSION_SQL).first()
    return row[0] if row is not None else "0"
