"""Opening a price store: where it lives, its engine (SQLite tuned for one writer and many readers),
the writers' lock, Alembic migrations, and what the first-use seeding loads."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool

from optimizer.offer import LocalBuild, Offer
from pricing.store.peek import MIGRATIONS_DIR, script_head


class BundledData(Protocol):
    """What the store needs from ``pricing.snapshot.loader.BundledSnapshot``."""

    offers: list[Offer]
    builds: list[LocalBuild]
    as_of: dict[str, datetime]
    sources: dict[str, str]


SeedLoader = Callable[[], BundledData]


def load_bundled_snapshot() -> BundledData:
    from pricing.snapshot.loader import load_bundled

    return load_bundled()


def _sqlite_engine(url: str) -> Engine:
    parsed = make_url(url)
    memory = parsed.database in (None, "", ":memory:")
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": 30},
        # One shared connection, or each connection would get its own empty in-memory database.
        poolclass=StaticPool if memory else None,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # We emit BEGIN ourselves (below): pysqlite's implicit transactions start too late for
        # a write lock taken up front.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        if not memory:
            # Readers keep reading the old snapshot while a refresh writes the new one. Switching
            # a fresh file to WAL needs a moment alone with it: connections opened together
            # may be told "locked" without waiting, so try again briefly.
            for attempt in range(50):
                try:
                    cur.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError:
                    if attempt == 49:
                        raise
                    time.sleep(0.05)
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # A writer takes the lock at BEGIN, so two writers queue instead of one failing with
        # "database is locked" when it upgrades a read lock.
        write = conn.get_execution_options().get("gpucost_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _engine_for(url: str) -> Engine:
    if make_url(url).get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return create_engine(url, pool_pre_ping=True)


def _lock_key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _lock(conn: Connection, name: str) -> None:
    """Serialize writers on ``name`` for the rest of the transaction.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: BEGIN IMMEDIATE already holds the
    database's single write lock.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%s)" % _lock_key(name))


def _at_revision(engine: Engine, head: str | None) -> bool:
    """Whether the database already stands at ``head`` (one row in ``alembic_version``)."""
    if head is None:
        return False
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return False
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    except SQLAlchemyError:
        return False
    return [tuple(r) for r in rows] == [(head,)]


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (a new database is created this way).

    A database already at the scripts' head is left alone without loading Alembic: that check
    is two small queries, the upgrade's set-up most of a second."""
    if _at_revision(engine, script_head()):
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    with engine.connect().execution_options(gpucost_write=True) as conn, conn.begin():
        # Replicas starting together: one migrates, the others wait and find it done.
        _lock(conn, "gpucost:migrate")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "heads")
