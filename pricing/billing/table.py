"""Reading a bill file into a table of strings, bounded, with errors that name the column.

CSV and Parquet are told apart by Parquet's magic bytes. Every cell is kept as text (money is
parsed to ``Decimal`` from its text, so sums are exact); empty cells and the literal ``NULL`` (the
official FOCUS sample writes it) are missing values.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from optimizer.errors import InvalidInput

# Bounds on untrusted input, checked before any parsing: a month of hourly lines for a few hundred
# resources fits many times over; larger bills should be filtered to the GPU accounts first.
MAX_BILL_BYTES = 200_000_000
MAX_BILL_ROWS = 2_000_000
MAX_COLUMNS = 1_000
NULLS = frozenset({"", "NULL", "null", "None", "nan", "NaN"})


class BillFileError(InvalidInput):
    """A bill that cannot be read; ``field`` is the column (or ``file``)."""


def is_parquet(data: bytes) -> bool:
    return data[:4] == b"PAR1"


Picker = Callable[[list[str]], list[str]]


def _cell(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if value in NULLS else value


def _check_header(header: list[str]) -> None:
    if len(header) > MAX_COLUMNS:
        raise BillFileError("file", f"{len(header)} columns; the limit is {MAX_COLUMNS}")
    dupes = sorted({c for c in header if header.count(c) > 1})
    if dupes:
        raise BillFileError(dupes[0], "the column appears more than once")


def load_table(data: bytes, pick: Picker) -> list[dict[str, str | None]]:
    """Rows of the file as dicts of text (``None`` for missing), in file order, holding the columns
    ``pick(header)`` names (a reader's own; a bill has dozens it does not read).

    CSV goes through the csv module and Parquet through pyarrow, column by column: building a
    dict per row over every column through pandas took ten times as long on a 100,000-line bill."""
    if len(data) > MAX_BILL_BYTES:
        raise BillFileError("file", f"the bill is {len(data):,} bytes; the limit is {MAX_BILL_BYTES:,}")
    if not data.strip():
        raise BillFileError("file", "the bill is empty")
    try:
        if is_parquet(data):
            return _parquet_rows(data, pick)
        return _csv_rows(data, pick)
    except BillFileError:
        raise
    except UnicodeDecodeError:
        raise BillFileError("file", "not UTF-8 text and not Parquet") from None
    except Exception as exc:  # noqa: BLE001 - csv and pyarrow raise many types for a malformed file
        raise BillFileError("file", f"cannot read the bill: {type(exc).__name__}: {exc}") from None


def _csv_rows(data: bytes, pick: Picker) -> list[dict[str, str | None]]:
    import csv

    reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""))
    header = [h.strip() for h in next(reader, [])]
    _check_header(header)
    cols = pick(header)
    idx = [header.index(c) for c in cols]
    rows: list[dict[str, str | None]] = []
    for n, rec in enumerate(reader, 2):
        if not rec:
            continue
        if len(rec) != len(header):
            raise BillFileError("file", f"row {n}: {len(rec)} fields where the header has {len(header)}")
        if len(rows) >= MAX_BILL_ROWS:
            raise BillFileError("file", f"more than {MAX_BILL_ROWS:,} rows")
        rows.append({c: _cell(rec[i]) for c, i in zip(cols, idx, strict=True)})
    return rows


def _parquet_rows(data: bytes, pick: Picker) -> list[dict[str, str | None]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(io.BytesIO(data))
    if pf.metadata.num_rows > MAX_BILL_ROWS:
        raise BillFileError("file", f"{pf.metadata.num_rows:,} rows; the limit is {MAX_BILL_ROWS:,}")
    header = list(pf.schema_arrow.names)
    _check_header(header)
    cols = pick(header)
    table = pf.read(columns=cols)
    columns = [[_cell(_text(v)) for v in table.column(c).to_pylist()] for c in cols]
    return [dict(zip(cols, values, strict=True)) for values in zip(*columns, strict=True)] if cols else (
        [{} for _ in range(table.num_rows)])


def _text(value: Any) -> str | None:
    """Parquet cells as text: maps and lists (CUR 2.0 ``resource_tags``, GCP ``labels``) as JSON."""
    if value is None:
        return None
    if isinstance(value, dict):
        return json.dumps({str(k): v for k, v in value.items()}, default=str)
    if isinstance(value, list | tuple):
        # pyarrow gives a map column as a list of (key, value) pairs.
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return json.dumps({str(k): v for k, v in value}, default=str)
        return json.dumps(list(value), default=str)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def require(columns: Iterable[str], needed: Iterable[str], layout: str) -> None:
    have = set(columns)
    missing = [c for c in needed if c not in have]
    if missing:
        raise BillFileError(
            missing[0], f"missing column(s) {', '.join(missing)}: not a {layout} file (columns found: "
            f"{', '.join(sorted(have)[:12])}{' ...' if len(have) > 12 else ''})")


def decimal_at(row: Mapping[str, str | None], col: str, n: int, *, default: Decimal | None = None) -> Decimal:
    raw = row.get(col)
    if raw is None:
        if default is not None:
            return default
        raise BillFileError(col, f"row {n}: empty, a number is needed")
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise BillFileError(col, f"row {n}: {raw[:40]!r} is not a number") from None
    if not value.is_finite():
        raise BillFileError(col, f"row {n}: {raw[:40]!r} is not a finite number")
    return value


def quantity_at(row: Mapping[str, str | None], col: str, n: int) -> float:
    """A usage quantity: missing is 0, negative is an error."""
    if row.get(col) is None:
        return 0.0
    value = decimal_at(row, col, n)
    if value < 0:
        raise BillFileError(col, f"row {n}: negative quantity {value}")
    return float(value)


def time_at(row: Mapping[str, str | None], col: str, n: int) -> datetime:
    raw = row.get(col)
    if raw is None:
        raise BillFileError(col, f"row {n}: empty, a date and time is needed")
    text = raw.replace("Z", "+00:00").replace(" UTC", "+00:00")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise BillFileError(col, f"row {n}: {raw[:40]!r} is not an ISO 8601 date and time") from None
    # Bills without an offset are in UTC (FOCUS: "ChargePeriodStart ... in UTC").
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def json_at(row: Mapping[str, str | None], col: str, n: int) -> Any:
    raw = row.get(col)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise BillFileError(col, f"row {n}: not valid JSON ({raw[:40]!r})") from None


def usd_converter(currencies: Mapping[str, int], col: str, rates: Mapping[str, float] | None) -> Callable[[str, Decimal], Decimal]:
    """How a line's money becomes USD: as is for USD; by ``rates`` (USD per unit) for others.
    A currency other than USD without a rate is an error naming the column."""
    rates = {k.upper(): v for k, v in (rates or {}).items()}
    foreign = sorted(c for c in currencies if c != "USD" and c not in rates)
    if foreign:
        mixed = "mixed currencies " if len(currencies) > 1 else ""
        raise BillFileError(
            col, f"{mixed}{', '.join(sorted(currencies))} without a rate for {', '.join(foreign)}: "
            "give --rate CUR=USD_PER_UNIT (quotes are in USD)")
    exact = {k: Decimal(str(v)) for k, v in rates.items()}

    def convert(currency: str, amount: Decimal) -> Decimal:
        return amount if currency == "USD" else amount * exact[currency]

    return convert
