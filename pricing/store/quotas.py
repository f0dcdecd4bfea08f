"""Account quotas in the price store: replace a provider's limits, list them.

A refresh replaces every row of the providers it read (one transaction), so a limit the account
no longer has does not linger. ``read_sqlite`` reads them without SQLAlchemy for the CLI's fast
path (``service.prepared``); ``stored_quotas`` picks the way for a price source.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from optimizer.quotas import QuotaLimit
from pricing.store.peek import read_only_rows
from pricing.store.steady import steady_read

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

# Bounds one read: a few dozen codes x regions is the real size.
MAX_QUOTAS = 50_000


def _quota_table() -> Any:
    # Imported here: the CLI's quote reads quotas with sqlite3 alone (``read_sqlite``) and must not
    # load SQLAlchemy (tests/integration/test_prepared_snapshot.py).
    from pricing.store.schema import QuotaRow

    return QuotaRow.__table__


class _Store(Protocol):
    engine: Engine

    def _read(self) -> Any: ...
    def _write(self) -> Any: ...
    def _upsert(self, conn: Connection, table: Any) -> Any: ...


def replace_quotas(store: _Store, provider: str, limits: Iterable[QuotaLimit], fetched_at: datetime | None = None) -> int:
    """Store ``limits`` as ``provider``'s whole set (earlier rows of it removed); returns the count."""
    when = fetched_at or datetime.now(UTC)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for q in limits:
        rows[(q.region, q.code)] = {
            "provider": provider, "region": q.region, "code": q.code, "quota_limit": float(q.limit),
            "name": q.name, "source": q.source, "fetched_at": when,
        }
    from sqlalchemy import delete

    table = _quota_table()
    with store._write() as conn:
        conn.execute(delete(table).where(table.c.provider == provider))
        if rows:
            conn.execute(table.insert(), list(rows.values()))
    return len(rows)


def _limit(provider: str, region: str, code: str, value: float, name: str | None, source: str) -> QuotaLimit:
    return QuotaLimit(provider=provider, region=region, code=code, limit=float(value), source=source, name=name)


# Plain SQL that SQLite and PostgreSQL both run as written: the store's engine and the sqlite3
# path read the same rows, and every quote reads them (the Core statement costs twice as much).
QUOTAS_SQL = (f"SELECT provider, region, code, quota_limit, name, source FROM quotas "
              f"ORDER BY provider, region, code LIMIT {MAX_QUOTAS}")


def list_quotas(store: _Store) -> list[QuotaLimit]:
    def read() -> tuple[QuotaLimit, ...]:
        with store._read() as conn:
            rows = conn.exec_driver_sql(QUOTAS_SQL).fetchall()
        return tuple(_limit(*r) for r in rows)

    # Every answer reads them; kept while nothing is committed (``QuotaLimit`` is frozen).
    return list(steady_read(store, "quotas", read))


def read_sqlite(path: Path) -> list[QuotaLimit]:
    """The quotas of the SQLite store at ``path``, read-only; none when there is no such table yet."""
    return [_limit(*r) for r in read_only_rows(path, QUOTAS_SQL)]


def stored_quotas(prices: Any) -> list[QuotaLimit]:
    """The quotas beside a price source: a ``PriceStore`` (its engine), a prepared reader (its
    SQLite file), or nothing else (fakes in tests: none)."""
    if getattr(prices, "engine", None) is not None and hasattr(prices, "_read"):
        return list_quotas(prices)
    db_file = getattr(prices, "db_file", None)
    if isinstance(db_file, Path):
        return read_sqlite(db_file)
    return []
