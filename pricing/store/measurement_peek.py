"""Stored measurements read without SQLAlchemy: an SQLite store's with plain ``sqlite3``
(read-only), for the CLI paths that answer without opening the store the full way
(``service.prepared``, ``gpucost estimate``); ``measurements_of`` picks the way for a price source.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pricing.store.peek import read_only_rows

if TYPE_CHECKING:
    from optimizer.measurement import Measurement

logger = logging.getLogger(__name__)

# Bounds what one read loads (the store refuses more).
MAX_MEASUREMENTS = 10_000


def from_record(record: Any) -> Measurement | None:
    # Imported with the first record: a store without measurements does not load their model.
    from optimizer.measurement import Measurement

    try:
        return Measurement.model_validate(record)
    except ValidationError as exc:  # a record an older or newer gpucost wrote: skipped, not fatal
        logger.warning("stored measurement skipped (%s)", exc.errors()[0].get("msg"))
        return None


# Newest measurement first; plain SQL that SQLite and PostgreSQL both run as written, so the
# sqlite3 path and the store's engine read the same rows.
MEASUREMENTS_SQL = f"SELECT record FROM measurements ORDER BY measured_at DESC, id LIMIT {MAX_MEASUREMENTS}"


def measurements_from(rows: Iterable[Sequence[Any]]) -> list[Measurement]:
    """Measurements from ``MEASUREMENTS_SQL``'s rows: JSON text (SQLite) or a decoded value
    (PostgreSQL's driver); an unreadable record is skipped."""
    out = []
    for (value,) in rows:
        if isinstance(value, str | bytes):
            try:
                value = json.loads(value)
            except ValueError:
                continue
        if (m := from_record(value)) is not None:
            out.append(m)
    return out


def read_sqlite(path: Path) -> list[Measurement]:
    """The measurements of the SQLite store at ``path``, read-only; none when the file or its
    table is not there yet (nothing was ever added)."""
    return measurements_from(read_only_rows(path, MEASUREMENTS_SQL))


def measurements_of(prices: Any) -> list[Measurement]:
    """The measurements beside a price source: a ``PriceStore`` (its engine), a prepared reader
    (its SQLite file), or nothing else (fakes in tests: none)."""
    if getattr(prices, "engine", None) is not None and hasattr(prices, "_read"):
        from pricing.store.measurements import list_measurements

        return list_measurements(prices)
    db_file = getattr(prices, "db_file", None)
    if isinstance(db_file, Path):
        return read_sqlite(db_file)
    return []
