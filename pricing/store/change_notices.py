"""Change notices on PostgreSQL: a number that moves whenever a write to the store may have been
committed, by any process on any host, read without a round trip.

SQLite tells this itself (``PRAGMA data_version``, ``PriceStore.change_mark``). PostgreSQL does
not, so revision 0007 puts a statement-level trigger on every table of the store that sends
``NOTIFY gpucost_store_changed`` (``CHANNEL``); PostgreSQL delivers it when the writing
transaction commits, and never for one rolled back. ``ChangeNotices`` listens on a connection of
its own, on a thread of its own, and counts what arrives. ``mark()`` is then a lock and two
reads: an answer's reads and the answer cache's version can be kept while it stays the same,
as they are on SQLite, instead of costing every request a transaction (``bench/store_reads.py``).

What the number promises, and how it fails safe:

* it moves at least once after every commit that wrote, once the notice arrives: on loopback,
  0.15 ms p50 and 0.25 ms p95 after the writer's commit returned (``bench/store_reads.py``,
  2026-12-02); a process busy computing hands the listener the interpreter within its switch
  interval. Another replica's refresh is served that much later. A write of this process moves
  it at once: ``wrote()``, called from the store's engine as the transaction commits and again
  as its connection goes back to the pool (``PriceStore.follow_changes``);
* ``mark()`` is None, so callers read every time, until the listener has heard its first
  heartbeat, while the connection is down, and whenever it has heard nothing for ``STALE_S``. The
  heartbeat is a notice the listener sends itself every ``HEARTBEAT_S`` on a channel of its own,
  so it proves the whole path: a connection that died without a word, or a connection pooler in
  transaction mode (which takes ``LISTEN`` and delivers nothing), cannot leave kept reads
  standing for longer than that;
* every new connection moves it too: notices sent while none was listening are not replayed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
import weakref
from typing import Any

logger = logging.getLogger(__name__)

CHANNEL = "gpucost_store_changed"
FUNCTION = "gpucost_store_changed"
TRIGGER = "gpucost_store_changed"
HEARTBEAT_S = 2.0
STALE_S = 3 * HEARTBEAT_S
# How long the thread waits for notices before it looks whether it should stop: what ``close``
# may wait for it.
_SLICE_S = 0.2
_BEAT = "NOTIFY {}"  # the heartbeat, to the listener's own channel
RETRY_MAX_S = 30.0
# libpq's own bounds, so a heartbeat on a dead link cannot hang the thread for long.
_CONNECT_ARGS = {"connect_timeout": 5, "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
                 "keepalives_count": 3, "tcp_user_timeout": 10_000, "application_name": "gpucost change notices"}

FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END
$$
"""


def trigger_sql(table: str) -> list[str]:
    """The statements that make every write to ``table`` notify ``CHANNEL`` (idempotent)."""
    quoted = '"' + table.replace('"', '""') + '"'
    return [
        f"DROP TRIGGER IF EXISTS {TRIGGER} ON {quoted}",
        (f"CREATE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {quoted} "
         f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()"),
    ]


def install(conn: Any) -> None:
    """Make every table of the current schema notify on writes (a migration's step; a migration
    that adds a table calls it again). ``conn``: a SQLAlchemy connection on PostgreSQL."""
    conn.exec_driver_sql(FUNCTION_SQL)
    tables = conn.exec_driver_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename").scalars().all()
    for table in tables:
        for statement in trigger_sql(table):
            conn.exec_driver_sql(statement)


def uninstall(conn: Any) -> None:
    tables = conn.exec_driver_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename").scalars().all()
    for table in tables:
        conn.exec_driver_sql(trigger_sql(table)[0])
    conn.exec_driver_sql(f"DROP FUNCTION IF EXISTS {FUNCTION}()")


class ChangeNotices:
    """Counts the store's change notices on a thread of its own (see the module's docstring).

    ``conninfo``: a libpq connection string or URI for the store's database. The thread ends at
    ``close()``, or by itself once ``owner`` (the store) is gone."""

    def __init__(self, conninfo: str, owner: object) -> None:
        self._conninfo = conninfo
        self._owner = weakref.ref(owner)
        self._lock = threading.Lock()
        self._count = 0
        self._listening = False
        self._heard = 0.0  # monotonic time the listener was last known alive
        self._stop = threading.Event()
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="gpucost-change-notices", daemon=True)
        self._thread.start()

    # -- what callers see ------------------------------------------------------------------------

    def mark(self) -> int | None:
        """The count of changes, or None while it cannot be trusted (not listening, or not heard
        from for ``STALE_S``)."""
        with self._lock:
            if not self._listening or time.monotonic() - self._heard > STALE_S:
                return None
            return self._count

    def wrote(self) -> None:
        """This process is committing a write: move the mark now, not when its notice arrives."""
        with self._lock:
            self._count += 1

    def wait_listening(self, timeout: float) -> bool:
        """Whether the listener is in place within ``timeout`` seconds (tests, benches)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.mark() is not None:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        """Stop listening; the thread closes its connection as it ends (within ``_SLICE_S``)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- the listener ----------------------------------------------------------------------------

    def _done(self) -> bool:
        return self._stop.is_set() or self._owner() is None

    def _run(self) -> None:
        delay = 0.5
        while not self._done():
            try:
                self._listen()
                delay = 0.5
            except Exception as exc:  # noqa: BLE001 - any failure: read every time, then reconnect
                if self._done():
                    break
                logger.info("store change notices interrupted (%s); reads go to the database meanwhile", exc)
            finally:
                with self._lock:
                    self._listening = False
                    self._heard = 0.0  # the next connection is trusted from its first heartbeat
                conn, self._conn = self._conn, None
                if conn is not None:
                    with contextlib.suppress(Exception):  # a connection that may already be gone
                        conn.close()
            if self._stop.wait(delay):
                break
            delay = min(RETRY_MAX_S, delay * 2)

    def _listen(self) -> None:
        import psycopg

        conn = psycopg.connect(self._conninfo, autocommit=True, **_CONNECT_ARGS)
        self._conn = conn
        # The heartbeat is a notice to itself, on a channel of its own: it proves that notices
        # reach this connection (a pooler in transaction mode takes LISTEN and delivers nothing).
        beat_channel = f"gpucost_beat_{uuid.uuid4().hex[:16]}"
        conn.execute(f"LISTEN {CHANNEL}")
        conn.execute(f"LISTEN {beat_channel}")
        with self._lock:
            # Notices sent while nobody listened are lost: a new connection is a change in itself.
            self._count += 1
            self._listening = True
        connected = sent = time.monotonic()
        conn.execute(_BEAT.format(beat_channel))
        warned = False
        while not self._done():
            for notice in conn.notifies(timeout=_SLICE_S):
                with self._lock:
                    if notice.channel != beat_channel:
                        self._count += 1
                    self._heard = time.monotonic()
            now = time.monotonic()
            if not warned and self._heard < connected and now - connected > STALE_S:
                warned = True
                logger.warning("the store's change notices do not arrive (a connection pooler in transaction "
                               "mode?): every answer reads the store")
            if now - sent >= HEARTBEAT_S:
                conn.execute(_BEAT.format(beat_channel))  # raises on a dead connection
                sent = now
