"""The database's clock, for times that several processes compare (lease expiry).

Each replica's own clock may be off by seconds or minutes (no NTP in a container, a suspended
laptop); a lease taken on one machine's clock and judged on another's can look expired while its
holder is alive, and be taken over. Every lease time is therefore read from the one clock all
replicas share: the database server's (``clock_timestamp()`` on PostgreSQL, which moves within a
transaction unlike ``now()``; SQLite's ``'now'``, with milliseconds, elsewhere ``CURRENT_TIMESTAMP``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select


def db_now(conn: Any) -> datetime:
    """The database's current time, timezone-aware UTC."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        value: Any = conn.exec_driver_sql("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')").scalar_one()
    elif dialect == "postgresql":
        value = conn.execute(select(func.clock_timestamp())).scalar_one()
    else:
        value = conn.execute(select(func.current_timestamp())).scalar_one()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:  # SQLite and CURRENT_TIMESTAMP without a zone are UTC
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
