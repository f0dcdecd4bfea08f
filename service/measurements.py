"""Measurements for both front ends: reading records from a file or a request (all checked
before any is stored), and finding the stored ones an answer should use.

Estimates read measurements without opening the store the full way where they can: an SQLite
store's table is read with plain ``sqlite3`` (``pricing.store.measurement_peek``), so an estimate
stays as fast as it was and never seeds a store just to find it holds no measurement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optimizer.errors import InvalidInput
from optimizer.measurement import Measurement, parse_measurement
from pricing.store.measurement_peek import MAX_MEASUREMENTS, measurements_of, read_sqlite
from pricing.store.peek import default_db_url, sqlite_path

# A measurements file is a handful of records; this bounds what a file can make the CLI parse.
MAX_FILE_BYTES = 10_000_000


def records_in(text: str, name: str) -> list[Any]:
    """The records in a file's text: one JSON object, a JSON list of them, or JSON lines."""
    stripped = text.strip()
    if not stripped:
        raise InvalidInput(name, "holds no measurement")
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        data = []
        for i, line in enumerate(stripped.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(name, f"line {i} is not JSON: {exc.msg}") from None
    records = data if isinstance(data, list) else [data]
    if len(records) > MAX_MEASUREMENTS:
        raise InvalidInput(name, f"holds {len(records)} records; at most {MAX_MEASUREMENTS} at once")
    return records


def parse_all(records: list[Any]) -> list[Measurement]:
    """Every record checked, or InvalidInput naming the first bad one's field (``[i].field``
    when there are several): nothing is stored unless all are good."""
    out = []
    for i, record in enumerate(records):
        try:
            out.append(parse_measurement(record))
        except InvalidInput as exc:
            if len(records) == 1:
                raise
            raise InvalidInput(f"[{i}].{exc.field}", exc.reason) from None
    return out


def read_records(path: Path) -> list[Measurement]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InvalidInput(str(path), f"larger than {MAX_FILE_BYTES // 1_000_000} MB")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(str(path), f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput(str(path), "is not UTF-8 text") from None
    try:
        return parse_all(records_in(text, str(path)))
    except InvalidInput as exc:
        if exc.field == str(path):
            raise
        raise InvalidInput(exc.field, f"{exc.reason} (in {path})") from None


def measurements_at(db_url: str | None) -> list[Measurement]:
    """The measurements of the store at ``db_url`` (None: the default SQLite file)."""
    url = db_url or default_db_url()
    path = sqlite_path(url)
    if path is not None:
        return read_sqlite(path)
    from pricing.store.repository import open_store

    return measurements_of(open_store(url))


def measurements_for_app(app: Any) -> list[Measurement]:
    """The measurements beside the app's store: from the open store, else read from the SQLite
    file the settings name without opening it, else from the store opened for it."""
    store = getattr(app.state, "store", None)
    if store is not None:
        return measurements_of(store)
    url = app.state.settings.db_url or default_db_url()
    path = sqlite_path(url)
    if path is not None:
        return read_sqlite(path)
    from service.api.deps import get_store_for

    return measurements_of(get_store_for(app))
