"""``PriceStore``: the price store's one interface, the same code on SQLite and PostgreSQL.

Reads serve the *current* snapshot of every provider; ``replace_rows`` validates a provider's new
price list, writes it as a new snapshot and makes it current in one transaction, so a reader sees
either the old list or the new one, never a mix, and a failure anywhere leaves the old one served.
``all_offers`` is memoized per process and keyed by the set of current snapshots, which one tiny
query reads on every call: quotes stay fast, and a refresh from another process shows up at once.

``setup`` opens and migrates a store. ``PriceStore`` keeps its transactions and first-use seeding
here and takes the rest from its parts: ``writes`` (snapshots, refresh attempts), ``reads`` (current
prices), ``history`` (status, price history) and ``leases``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from optimizer.errors import InvalidInput, StoreError
from optimizer.offer import LocalBuild, Offer
from pricing.store.health import Health, plain_error
from pricing.store.history import History
from pricing.store.leases import Leases
from pricing.store.peek import (
    DEFAULT_DB_FILE,
    MIGRATIONS_DIR,
    SEED_MARKER,
    default_db_url,
)
from pricing.store.reads import Reads
from pricing.store.rows import LOCAL, _meta, _snap, content_hash
from pricing.store.setup import (
    BundledData,
    SeedLoader,
    _engine_for,
    _lock,
    load_bundled_snapshot,
    migrate,
)
from pricing.store.writes import SnapshotInfo, Writes

if TYPE_CHECKING:
    from pricing.store.change_notices import ChangeNotices

__all__ = [
    "DEFAULT_DB_FILE",
    "LOCAL",
    "MIGRATIONS_DIR",
    "SEED_MARKER",
    "BundledData",
    "PriceStore",
    "SeedLoader",
    "SnapshotInfo",
    "content_hash",
    "default_db_url",
    "load_bundled_snapshot",
    "migrate",
    "open_store",
]

try:
    import fcntl
except ImportError:  # not on Windows: openers there do without the creation lock
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)
T = TypeVar("T")


def open_store(db_url: str | None = None, *, seed: SeedLoader | None = None) -> PriceStore:
    """Open (creating and migrating if needed) the store at ``db_url``.

    ``None`` means an SQLite file in the user's data directory. An empty store is filled from
    the bundled snapshot on first use; ``seed`` replaces that loader (tests).
    """
    url = db_url or default_db_url()
    try:
        path = _sqlite_file(url)
    except ArgumentError:
        raise InvalidInput("GPUCOST_DB_URL", _NOT_A_URL) from None
    with _creation_lock(path):
        if path is not None:
            _refuse_empty_file(path)
        try:
            engine = _engine_for(url)
            migrate(engine)
        except ArgumentError as exc:  # an unknown back end ("foo://") is the URL's fault too
            raise InvalidInput("GPUCOST_DB_URL", f"{_NOT_A_URL} ({plain_error(exc)})") from None
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot open the price store: {plain_error(exc)}") from exc
    return PriceStore(engine, seed=seed)


# The URL itself is not repeated: it may hold a password.
_NOT_A_URL = ("not a database URL the store can use; e.g. sqlite:////var/lib/gpucost/prices.sqlite or "
              "postgresql+psycopg://user@host/gpucost")


def _sqlite_file(url: str) -> Path | None:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@contextmanager
def _creation_lock(path: Path | None) -> Iterator[None]:
    """Openers of one SQLite file take turns until it is created and migrated (processes too,
    through an flock on a sidecar file), so a file seen empty under the lock really is empty and
    not one another opener is just creating."""
    if path is None or fcntl is None or not path.parent.is_dir():
        yield
        return
    try:
        handle = open(path.with_name(path.name + ".lock"), "a+b")  # noqa: SIM115 - closed below
    except OSError:  # a read-only folder: nobody creates the file there either
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _refuse_empty_file(path: Path) -> None:
    """A store file that exists but holds 0 bytes was truncated or lost its content (a full disk,
    a failed copy): say so, rather than let SQLite take it for a new database and quietly fill it
    with the bundled prices, which would hide the loss."""
    if path.is_file() and path.stat().st_size == 0:
        raise StoreError(
            f"the price store file {path} is empty (0 bytes): it was truncated or damaged. "
            "Restore it from a backup, or delete it to start again from the bundled prices."
        )


@dataclass(slots=True)
class _Held:
    """The connection ``PriceStore.reading`` holds for the reads inside it, opened by the first
    read that reaches the database (none when every read was answered by ``PriceStore.steady``)."""

    store: PriceStore
    conn: Connection | None = None
    opened: AbstractContextManager[Connection] | None = None
    broken: bool = False  # a read failed: the rest open their own connections
    # ``PriceStore.change_mark`` as the first ``steady`` read inside took it: the others use it.
    mark: int | None = None
    marked: bool = False


_HELD: ContextVar[_Held | None] = ContextVar("gpucost_store_reading", default=None)


def in_reading(store: object) -> bool:
    """Whether this thread or task is inside ``store.reading()`` (modules with their own
    connections, ``pricing.store.runs``, read through the store's then, and do not write)."""
    held = _HELD.get()
    return held is not None and held.store is store


# Statements that do not write: anything else run in a transaction counts as a write (a harmless
# extra change where it did not).
_READ_ONLY = ("SELECT", "SHOW", "SET ", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "LISTEN")
_WRITING, _COMMITTED = "gpucost_writing", "gpucost_committed_write"


def _count_own_writes(engine: Engine, notices: ChangeNotices) -> None:
    """Move ``notices``' mark when this process commits a write, without waiting for the notice:
    once as the commit begins, and again as the connection goes back to the pool, after it (a
    reader between the two may keep what it read before the commit; the second move undoes that
    before the writer's call returns)."""
    from sqlalchemy import event

    def executed(conn: Connection, cursor: Any, statement: str, *_: Any) -> None:
        if not statement.lstrip()[:9].upper().startswith(_READ_ONLY):
            conn.info[_WRITING] = True

    def commit(conn: Connection) -> None:
        if conn.info.pop(_WRITING, False):
            conn.info[_COMMITTED] = True
            notices.wrote()

    def rollback(conn: Connection) -> None:
        conn.info.pop(_WRITING, None)

    def checkin(dbapi_conn: Any, record: Any) -> None:
        if record.info.pop(_COMMITTED, False):
            notices.wrote()

    event.listen(engine, "after_cursor_execute", executed)
    event.listen(engine, "commit", commit)
    event.listen(engine, "rollback", rollback)
    event.listen(engine.pool, "checkin", checkin)


class PriceStore(Reads, Writes, History, Leases, Health):
    """Current prices, their history and refresh bookkeeping, on one SQLAlchemy engine."""

    def __init__(self, engine: Engine, *, seed: SeedLoader | None = None) -> None:
        self.engine = engine
        self._seed = seed or load_bundled_snapshot
        self._seeded = False
        self._lock = threading.Lock()
        self._offers_memo: tuple[tuple[tuple[str, int], ...], list[Offer]] | None = None
        self._builds_memo: tuple[tuple[tuple[str, int], ...], list[LocalBuild]] | None = None
        self._marks_file = _sqlite_file(str(engine.url))
        self._marks: sqlite3.Connection | None = None
        self._marks_lock = threading.Lock()
        self._steady: dict[str, tuple[int, Any]] = {}
        self._notices: ChangeNotices | None = None

    def __repr__(self) -> str:
        return f"PriceStore({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        with self._marks_lock:
            if self._marks is not None:
                self._marks.close()
                self._marks = None
            notices, self._notices = self._notices, None
        if notices is not None:
            notices.close()
        self.engine.dispose()

    def follow_changes(self) -> bool:
        """On PostgreSQL, listen for the store's change notices (``pricing.store.change_notices``)
        so that ``change_mark`` can tell, as it does on SQLite, that nothing was committed since:
        a long-lived process (the server) then keeps an answer's reads and the answer cache's
        version instead of reading them for every request. Whether the store follows changes now
        (always True on a SQLite file, which needs nothing for it; False in memory)."""
        if self.engine.dialect.name != "postgresql":
            return self._marks_file is not None
        with self._marks_lock:
            if self._notices is not None:
                return True
            from pricing.store.change_notices import ChangeNotices

            conninfo = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
            notices = ChangeNotices(conninfo, self)
            # Own writes are counted before any mark is given (none is before the first heartbeat).
            _count_own_writes(self.engine, notices)
            self._notices = notices
        return True

    def change_mark(self) -> int | None:
        """A number that changes whenever a write may have been committed to the store, by this
        process or any other; None where that cannot be told cheaply (an in-memory SQLite store,
        PostgreSQL while the store does not follow its change notices) or the file cannot be read.

        On PostgreSQL, the count of change notices (``follow_changes``). On SQLite, ``PRAGMA
        data_version`` on a connection of the store's own that never writes: it changes with
        every commit any other connection makes to the file, and reading it starts no transaction
        (``bench/store_reads.py``, 2026-12-02: 4 us, against 136 us for the answer cache's three
        reads it lets the server skip)."""
        notices = self._notices
        if notices is not None:
            return notices.mark()
        if self._marks_file is None:
            return None
        with self._marks_lock:
            try:
                if self._marks is None:
                    # mode=rw: never creates a file that is not there.
                    self._marks = sqlite3.connect(f"file:{self._marks_file}?mode=rw", uri=True,
                                                  check_same_thread=False, isolation_level=None, timeout=1)
                row = self._marks.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error:
                return None
        return int(row[0])

    def steady(self, name: str, read: Callable[[], T]) -> T:
        """``read()``, or what it gave last time under ``name`` when nothing was committed to the
        store since (``change_mark``); on in-memory SQLite, and on PostgreSQL unless the store
        follows its change notices (``follow_changes``), always ``read()``.

        For the small reads every answer makes (which snapshots are current, the measurements,
        quotas and learnt calibration): while the prices stay as they are, an answer then opens no
        connection and begins no transaction (``bench/store_reads.py``). The mark is taken before
        reading, so a commit landing meanwhile changes it and the next call reads again. Each read
        is one statement, as consistent as before; only reads that do reach the database share
        ``reading``'s transaction. The value is shared between callers: they must not change it.

        Inside ``reading`` the mark is taken once, by the first of its ``steady`` reads, and the
        others compare their kept values with it: a commit landing meanwhile is read by the next
        answer (a read that was not kept reads the store as it is, as before). A served quote then
        makes one ``PRAGMA data_version`` call, not four (each one lets go of the interpreter lock,
        which a busy server's other threads then hold)."""
        held = _HELD.get()
        if held is not None and held.store is self:
            if not held.marked:
                held.mark, held.marked = self.change_mark(), True
            mark = held.mark
        else:
            mark = self.change_mark()
        if mark is None:
            return read()
        kept = self._steady.get(name)
        if kept is not None and kept[0] == mark:
            return kept[1]  # type: ignore[no-any-return]
        value = read()
        self._steady[name] = (mark, value)
        return value

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        held = _HELD.get()
        if held is not None and held.store is self and not held.broken:
            try:
                if held.conn is None:
                    held.opened = self.engine.connect()
                    held.conn = held.opened.__enter__()
                yield held.conn
            except SQLAlchemyError as exc:
                # PostgreSQL refuses every later statement of a failed transaction: the reads
                # after this one open their own connections, as they would outside ``reading``.
                held.broken = True
                raise StoreError(f"price store read failed: {plain_error(exc)}") from exc
            return
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"price store read failed: {plain_error(exc)}") from exc

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Reads made inside (by this thread or task) share one connection and one transaction.

        An answer starts with four small reads (which snapshots are current, the stored
        measurements, calibration and quotas): each on its own connection costs a pool checkout
        (on PostgreSQL with its liveness ping), a BEGIN and a rollback. ``bench/store_reads.py``
        (2-core machine, 2026-12-01): 256 us apart against 154 us together on SQLite, 2.24 ms
        against 1.21 ms on PostgreSQL over loopback. Only for reads: a write inside is refused
        (the held read would not see it, and an in-memory SQLite store has one connection per
        thread), so the store is seeded first, and callers read here and compute and write after.
        The connection is opened by the first read that reaches the database: when ``steady``
        answers them all, none is."""
        if in_reading(self):
            yield
            return
        self.ensure_seeded()
        held = _Held(self)
        token = _HELD.set(held)
        try:
            yield
        finally:
            _HELD.reset(token)
            if held.opened is not None:
                try:
                    held.opened.__exit__(None, None, None)
                except SQLAlchemyError as exc:
                    raise StoreError(f"price store read failed: {plain_error(exc)}") from exc

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        if in_reading(self):
            # The held read would not see it (and on an in-memory SQLite store it would wait on
            # the held connection itself): read in ``reading``, write after it.
            raise RuntimeError("a price store write inside PriceStore.reading()")
        try:
            with self.engine.connect().execution_options(gpucost_write=True) as conn, conn.begin():
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"price store write failed: {plain_error(exc)}") from exc

    def _upsert(self, conn: Connection, table: Any) -> Any:
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table)

    # -- seeding ------------------------------------------------------------------------------

    def ensure_seeded(self) -> None:
        """Fill an empty store from the bundled snapshot, once, whoever gets there first."""
        if self._seeded:
            return
        with self._read() as conn:
            done = conn.execute(select(_meta.c.value).where(_meta.c.key == SEED_MARKER)).first()
        if done is None:
            self._seed_once()
        self._seeded = True

    def _seed_once(self) -> None:
        with self._write() as conn:
            _lock(conn, "gpucost:seed")
            # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
            inserted = conn.execute(
                self._upsert(conn, _meta)
                .values(key=SEED_MARKER, value=datetime.now(UTC).isoformat())
                .on_conflict_do_nothing(index_elements=["key"])
                .returning(_meta.c.key)
            ).first()
            if inserted is None:
                return  # another process seeded it meanwhile
            if conn.execute(select(func.count()).select_from(_snap)).scalar_one():
                return  # not empty: prices were written before the first read
            try:
                bundled = self._seed()
            except Exception as exc:
                raise StoreError(f"the bundled price snapshot could not be loaded: {exc}") from exc
            now = datetime.now(UTC)
            by_provider: dict[str, list[Offer | LocalBuild]] = defaultdict(list)
            for offer in bundled.offers:
                by_provider[offer.provider].append(offer)
            if bundled.builds:
                by_provider[LOCAL].extend(bundled.builds)
            for provider, rows in sorted(by_provider.items()):
                as_of = bundled.as_of.get(provider) or min(r.as_of for r in rows)
                source = bundled.sources.get(provider) or "bundled snapshot"
                self._write_snapshot(conn, provider, rows, fetched_at=now, as_of=as_of, source=source,
                                     digest=content_hash(rows))
            logger.info("price store seeded from the bundled snapshot: %s",
                        {p: len(r) for p, r in by_provider.items()})
