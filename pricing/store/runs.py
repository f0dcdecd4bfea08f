"""Planned runs, bill imports and their lines, and learnt calibration, in the price store.

Everything an import writes (the import, its lines, the recomputed calibration, the version that
turns cached quotes stale) is written in one transaction: a bill is stored whole or not at all.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from optimizer.bill_calibration import learn
from optimizer.errors import InvalidInput, StoreError
from optimizer.reconcile import run_bill
from optimizer.runs import BillLine, CalibrationFactor, PlannedRun
from pricing.store.calibration_peek import CALIBRATION_SQL, factors_from
from pricing.store.repository import in_reading
from pricing.store.schema import (
    BillCalibrationRow,
    BillImportRow,
    BillLineRow,
    PlannedRunRow,
    StoreMetaRow,
)
from pricing.store.steady import steady_read

_runs = PlannedRunRow.__table__
_imports = BillImportRow.__table__
_lines = BillLineRow.__table__
_calib = BillCalibrationRow.__table__
_meta = StoreMetaRow.__table__

VERSION_KEY = "runs_version"
_VERSION_SQL = f"SELECT value FROM store_meta WHERE key = '{VERSION_KEY}'"
MAX_LIST = 10_000


@dataclass(frozen=True)
class StoredLine:
    line: BillLine
    run_id: str | None
    matched_by: str | None
    import_id: int


def _engine(store: Any) -> Engine:
    engine = getattr(store, "engine", None)
    if engine is None:
        raise StoreError("runs and bills need the price store (GPUCOST_DB_URL)")
    return engine  # type: ignore[no-any-return]


@contextmanager
def _read(store: Any) -> Iterator[Connection]:
    reader = getattr(store, "_read", None)
    if reader is not None:  # a PriceStore: its connections, an answer's shared one included
        with reader() as conn:
            yield conn
        return
    try:
        with _engine(store).connect() as conn:
            yield conn
    except SQLAlchemyError as exc:
        raise StoreError(f"price store read failed: {type(exc).__name__}") from exc


@contextmanager
def _write(store: Any) -> Iterator[Connection]:
    if in_reading(store):
        raise RuntimeError("a price store write inside PriceStore.reading()")
    try:
        with _engine(store).connect().execution_options(gpucost_write=True) as conn, conn.begin():
            yield conn
    except IntegrityError:
        raise
    except SQLAlchemyError as exc:
        raise StoreError(f"price store write failed: {type(exc).__name__}") from exc


# -- runs ---------------------------------------------------------------------------------------


def add_run(store: Any, run: PlannedRun) -> PlannedRun:
    """Store a planned run; a run id already taken is bad input (ids are what bills are tagged with)."""
    try:
        with _write(store) as conn:
            conn.execute(insert(_runs).values(
                run_id=run.run_id, team=run.team, job=run.job, provider=run.option.provider,
                gpu=run.option.gpu, quoted_usd=run.quoted_usd, quoted_hours=run.quoted_hours,
                snapshot_id=run.snapshot_id, created_at=run.created_at, record=run.model_dump(mode="json"),
            ))
            _bump_version(conn)
    except IntegrityError:
        raise InvalidInput("run_id", f"a run {run.run_id!r} exists already; run ids are unique") from None
    return run


def list_runs(store: Any, team: str | None = None) -> list[PlannedRun]:
    query = select(_runs.c.record).order_by(_runs.c.created_at, _runs.c.run_id).limit(MAX_LIST)
    if team is not None:
        query = query.where(_runs.c.team == team)
    with _read(store) as conn:
        return [PlannedRun.model_validate(r) for (r,) in conn.execute(query)]


# -- bills --------------------------------------------------------------------------------------


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def imported(store: Any, digest: str) -> int | None:
    with _read(store) as conn:
        return conn.execute(select(_imports.c.id).where(_imports.c.file_sha256 == digest)).scalar()


def save_import(
    store: Any, digest: str, fmt: str, lines: Sequence[BillLine], matches: dict[int, tuple[str, str]],
    *, now: datetime,
) -> tuple[int, list[CalibrationFactor]]:
    """Store a whole bill and relearn calibration from every run's stored lines, in one
    transaction. ``matches``: line row -> (run id, how). Returns the import id and the factors."""
    billed = sum((ln.billed_usd for ln in lines), Decimal(0))
    effective = sum((ln.effective_usd for ln in lines), Decimal(0))
    with _write(store) as conn:
        import_id = conn.execute(insert(_imports).values(
            file_sha256=digest, format=fmt, imported_at=now, lines=len(lines),
            billed_total=str(billed), effective_total=str(effective),
        ).returning(_imports.c.id)).scalar_one()
        rows = []
        for ln in lines:
            run_id, how = matches.get(ln.row, (None, None))
            rows.append({
                "import_id": import_id, "row": ln.row, "run_id": run_id, "matched_by": how,
                "provider": ln.provider, "category": ln.category, "charge_start": ln.start, "charge_end": ln.end,
                "billed": str(ln.billed_usd), "effective": str(ln.effective_usd), "hours": ln.hours,
                "hours_per": ln.hours_per, "resource_id": ln.resource_id, "tags": dict(ln.tags),
                "service": ln.service, "description": ln.description, "charge_category": ln.charge_category,
                "covered": ln.covered,
            })
        for i in range(0, len(rows), 5000):
            conn.execute(insert(_lines), rows[i:i + 5000])
        factors = _relearn(conn, now)
        _bump_version(conn)
    return import_id, factors


def _line_of(r: Any) -> BillLine:
    return BillLine(
        row=r.row, billed_usd=Decimal(r.billed), effective_usd=Decimal(r.effective), start=r.charge_start,
        end=r.charge_end, provider=r.provider, category=r.category, hours=r.hours, hours_per=r.hours_per,
        resource_id=r.resource_id, tags=r.tags or {}, service=r.service, description=r.description,
        charge_category=r.charge_category, covered=r.covered,
    )


def stored_lines(store: Any, matched_only: bool = False) -> list[StoredLine]:
    query = select(_lines).order_by(_lines.c.import_id, _lines.c.row)
    if matched_only:
        query = query.where(_lines.c.run_id.is_not(None))
    with _read(store) as conn:
        return [StoredLine(_line_of(r), r.run_id, r.matched_by, r.import_id) for r in conn.execute(query)]


def _relearn(conn: Connection, now: datetime) -> list[CalibrationFactor]:
    """Every run's stored lines -> its bill -> factors per provider and GPU, replacing the table."""
    runs = {r["run_id"]: PlannedRun.model_validate(r) for (r,) in conn.execute(select(_runs.c.record))}
    per_run: dict[str, list[tuple[BillLine, str]]] = {}
    for r in conn.execute(select(_lines).where(_lines.c.run_id.is_not(None))):
        per_run.setdefault(r.run_id, []).append((_line_of(r), r.matched_by or "tag"))
    bills = [run_bill(runs[rid], ls, now) for rid, ls in per_run.items() if rid in runs]
    factors = learn(bills)
    conn.execute(delete(_calib))
    for f in factors:
        conn.execute(insert(_calib).values(
            provider=f.provider, gpu=f.gpu, hours_factor=f.hours_factor, rate_factor=f.rate_factor,
            runs=f.runs, updated_at=now,
        ))
    return factors


def _bump_version(conn: Connection) -> None:
    value = uuid.uuid4().hex
    done = conn.execute(update(_meta).where(_meta.c.key == VERSION_KEY).values(value=value)).rowcount
    if not done:
        conn.execute(insert(_meta).values(key=VERSION_KEY, value=value))


# -- calibration, read by every quote -------------------------------------------------------------


def calibration(store: Any) -> list[CalibrationFactor]:
    """The learnt factors: through SQLAlchemy for a store, through sqlite3 for a prepared reader
    (the CLI's quick path, which does not open the store the full way)."""
    db_file = getattr(store, "db_file", None)
    if getattr(store, "engine", None) is None and isinstance(db_file, Path):
        from pricing.store.calibration_peek import calibration_from_file

        return calibration_from_file(db_file)
    def read() -> tuple[Any, ...]:
        with _read(store) as conn:  # plain SQL, shared with the sqlite3 path: every quote reads this
            return tuple(conn.exec_driver_sql(CALIBRATION_SQL).fetchall())

    # The rows are kept while nothing is committed, and made into factors (which callers may
    # change) for each caller.
    return factors_from(steady_read(store, "calibration", read))


def version(store: Any) -> str:
    """Changes whenever a bill is imported: part of the answer cache's key, since quotes read the
    factors learnt from bills."""
    try:
        with _read(store) as conn:  # plain SQL: the HTTP answer cache asks this every request
            return conn.exec_driver_sql(_VERSION_SQL).scalar() or ""
    except StoreError:
        return ""


def now_utc() -> datetime:
    return datetime.now(UTC)
