"""``PriceStore``: the price store's one interface, the same code on SQLite and PostgreSQL.

Reads serve the *current* snapshot of every provider; ``replace_rows`` validates a provider's new
price list, writes it as a new snapshot and makes it current in one transaction, so a reader sees
either the old list or the new one, never a mix, and a failure anywhere leaves the old one served.
``all_offers`` is memoized per process and keyed by the set of current snapshots, which one tiny
query reads on every call: quotes stay fast, and a refresh from another process shows up at once.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, create_engine, delete, event, func, insert, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from optimizer.errors import InvalidInput, StoreError
from optimizer.gpus import canonical_gpu
from pricing.offer import LocalBuild, Offer
from pricing.store.schema import (
    LeaseRow,
    LocalBuildRow,
    OfferRow,
    ProviderStatusRow,
    SnapshotRow,
    StoreMetaRow,
)
from pricing.validate import validate_rows
from service.schemas import ProviderStatus

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DEFAULT_DB_FILE = "prices.sqlite"
SEED_MARKER = "bundled_snapshot_loaded"
LOCAL = "local"

_snap = SnapshotRow.__table__
_offers = OfferRow.__table__
_builds = LocalBuildRow.__table__
_status = ProviderStatusRow.__table__
_leases = LeaseRow.__table__
_meta = StoreMetaRow.__table__

_OFFER_FIELDS = [name for name in Offer.model_fields if name in _offers.c]


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


@dataclass(frozen=True)
class SnapshotInfo:
    id: int
    provider: str
    fetched_at: datetime
    as_of: datetime
    source: str
    row_count: int
    content_hash: str
    changed: bool  # False: identical content was already current, nothing written
    previous_rows: int | None = None


@dataclass(frozen=True)
class _Current:
    """The current snapshot of one provider, as the version check reads it."""

    id: int
    provider: str
    content_hash: str
    as_of: datetime
    row_count: int


def default_db_url() -> str:
    import platformdirs

    folder = Path(platformdirs.user_data_dir("gpucost"))
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / DEFAULT_DB_FILE}"


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


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (a new database is created this way)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    with engine.connect().execution_options(gpucost_write=True) as conn, conn.begin():
        # Replicas starting together: one migrates, the others wait and find it done.
        _lock(conn, "gpucost:migrate")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def open_store(db_url: str | None = None, *, seed: SeedLoader | None = None) -> PriceStore:
    """Open (creating and migrating if needed) the store at ``db_url``.

    ``None`` means an SQLite file in the user's data directory. An empty store is filled from
    the bundled snapshot on first use; ``seed`` replaces that loader (tests).
    """
    url = db_url or default_db_url()
    try:
        engine = _engine_for(url)
        migrate(engine)
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot open the price store: {exc}") from exc
    return PriceStore(engine, seed=seed)


def content_hash(rows: Sequence[Offer | LocalBuild]) -> str:
    """A hash of the rows' content, independent of their order."""
    dumps = sorted(json.dumps(r.model_dump(mode="json"), sort_keys=True) for r in rows)
    digest = hashlib.sha256()
    for d in dumps:
        digest.update(d.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _did_you_mean(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def _build_row(snapshot_id: int, build: LocalBuild) -> dict[str, Any]:
    data = build.model_dump(mode="json")
    parts = data.pop("parts")
    return {
        "snapshot_id": snapshot_id,
        "build_id": build.id,
        "gpu": build.gpu,
        "gpu_count": build.gpu_count,
        "price_usd": build.price_usd,
        "source": build.source,
        "as_of": build.as_of,
        "attrs": data,
        "parts": parts,
    }


def _offer_row(snapshot_id: int, offer: Offer) -> dict[str, Any]:
    row = {name: getattr(offer, name) for name in _OFFER_FIELDS}
    row["snapshot_id"] = snapshot_id
    return row


class PriceStore:
    """Current prices, their history and refresh bookkeeping, on one SQLAlchemy engine."""

    def __init__(self, engine: Engine, *, seed: SeedLoader | None = None) -> None:
        self.engine = engine
        self._seed = seed or load_bundled_snapshot
        self._seeded = False
        self._lock = threading.Lock()
        self._offers_memo: tuple[tuple[tuple[str, int], ...], list[Offer]] | None = None
        self._builds_memo: tuple[tuple[tuple[str, int], ...], list[LocalBuild]] | None = None

    def __repr__(self) -> str:
        return f"PriceStore({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        self.engine.dispose()

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
        except DBAPIError as exc:
            raise StoreError(f"price store read failed: {exc.orig}") from exc

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        try:
            with self.engine.connect().execution_options(gpucost_write=True) as conn, conn.begin():
                yield conn
        except DBAPIError as exc:
            raise StoreError(f"price store write failed: {exc.orig}") from exc

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

    # -- writing ------------------------------------------------------------------------------

    def _current_of(self, conn: Connection, provider: str) -> Any:
        return conn.execute(
            select(_snap.c.id, _snap.c.row_count, _snap.c.content_hash).where(
                _snap.c.provider == provider, _snap.c.is_current
            )
        ).first()

    def _insert_snapshot(self, conn: Connection, values: dict[str, Any]) -> int:
        result = conn.execute(insert(_snap).values(**values, is_current=False).returning(_snap.c.id))
        return int(result.scalar_one())

    def _insert_rows(self, conn: Connection, snapshot_id: int, rows: Sequence[Offer | LocalBuild]) -> None:
        offers = [_offer_row(snapshot_id, r) for r in rows if isinstance(r, Offer)]
        builds = [_build_row(snapshot_id, r) for r in rows if isinstance(r, LocalBuild)]
        if offers:
            conn.execute(insert(_offers), offers)
        if builds:
            conn.execute(insert(_builds), builds)

    def _flip_current(self, conn: Connection, provider: str, snapshot_id: int) -> None:
        conn.execute(
            update(_snap).where(_snap.c.provider == provider, _snap.c.is_current).values(is_current=False)
        )
        conn.execute(update(_snap).where(_snap.c.id == snapshot_id).values(is_current=True))

    def _write_snapshot(
        self,
        conn: Connection,
        provider: str,
        rows: Sequence[Offer | LocalBuild],
        *,
        fetched_at: datetime,
        as_of: datetime,
        source: str,
        digest: str,
    ) -> int:
        snapshot_id = self._insert_snapshot(
            conn,
            {
                "provider": provider,
                "fetched_at": fetched_at,
                "as_of": as_of,
                "source": source,
                "row_count": len(rows),
                "content_hash": digest,
                "created_at": datetime.now(UTC),
            },
        )
        self._insert_rows(conn, snapshot_id, rows)
        self._flip_current(conn, provider, snapshot_id)
        return snapshot_id

    def replace_rows(
        self,
        provider: str,
        rows: Sequence[Offer] | Sequence[LocalBuild],
        *,
        fetched_at: datetime,
        source: str,
        force: bool = False,
        as_of: datetime | None = None,
    ) -> SnapshotInfo:
        """Validate ``rows`` and make them ``provider``'s current price list, atomically.

        Raises ``ValidationFailed`` (the current rows stay) or ``StoreError``. Content identical
        to the current snapshot writes nothing and answers ``changed=False``.
        """
        self.ensure_seeded()
        rows = list(rows)
        if fetched_at.tzinfo is None:
            raise InvalidInput("fetched_at", "must be timezone-aware")
        digest = content_hash(rows)
        snapshot_as_of = as_of or (min(r.as_of for r in rows) if rows else fetched_at)
        with self._write() as conn:
            _lock(conn, f"gpucost:provider:{provider}")
            current = self._current_of(conn, provider)
            previous_rows = int(current.row_count) if current else None
            validate_rows(provider, rows, previous_rows=previous_rows, force=force)
            if current is not None and current.content_hash == digest:
                return SnapshotInfo(
                    id=int(current.id), provider=provider, fetched_at=fetched_at, as_of=snapshot_as_of,
                    source=source, row_count=len(rows), content_hash=digest, changed=False,
                    previous_rows=previous_rows,
                )
            snapshot_id = self._write_snapshot(
                conn, provider, rows, fetched_at=fetched_at, as_of=snapshot_as_of, source=source,
                digest=digest,
            )
        return SnapshotInfo(
            id=snapshot_id, provider=provider, fetched_at=fetched_at, as_of=snapshot_as_of,
            source=source, row_count=len(rows), content_hash=digest, changed=True,
            previous_rows=previous_rows,
        )

    def record_attempt(self, provider: str, error: str | None, *, at: datetime | None = None) -> None:
        """Note a refresh attempt: ``error`` None marks success and clears the last error."""
        at = at or datetime.now(UTC)
        values: dict[str, Any] = {"last_attempt": at, "last_error": error[:4000] if error else None}
        if error is None:
            values["last_success"] = at
        with self._write() as conn:
            stmt = self._upsert(conn, _status).values(provider=provider, **values)
            conn.execute(stmt.on_conflict_do_update(index_elements=["provider"], set_=values))

    # -- reading ------------------------------------------------------------------------------

    def current_rows(self, provider: str) -> int | None:
        """Row count of ``provider``'s current snapshot, None if it has none."""
        self.ensure_seeded()
        with self._read() as conn:
            row = self._current_of(conn, provider)
        return int(row.row_count) if row else None

    def _currents(self) -> list[_Current]:
        with self._read() as conn:
            result = conn.execute(
                select(_snap.c.id, _snap.c.provider, _snap.c.content_hash, _snap.c.as_of, _snap.c.row_count)
                .where(_snap.c.is_current)
                .order_by(_snap.c.provider)
            )
            return [_Current(int(r.id), r.provider, r.content_hash, r.as_of, int(r.row_count)) for r in result]

    @staticmethod
    def _version(currents: Sequence[_Current]) -> tuple[tuple[str, int], ...]:
        return tuple((c.provider, c.id) for c in currents)

    def all_offers(self) -> list[Offer]:
        """Every offer of every provider's current snapshot (a new list each call)."""
        self.ensure_seeded()
        version = self._version(self._currents())
        memo = self._offers_memo
        if memo is not None and memo[0] == version:
            return list(memo[1])
        with self._lock:
            memo = self._offers_memo
            if memo is None or memo[0] != version:
                memo = (version, self._load_offers([i for _, i in version]))
                self._offers_memo = memo
        return list(memo[1])

    def _load_offers(self, snapshot_ids: list[int]) -> list[Offer]:
        if not snapshot_ids:
            return []
        cols = [_offers.c[name] for name in _OFFER_FIELDS]
        stmt = (
            select(*cols)
            .where(_offers.c.snapshot_id.in_(snapshot_ids))
            .order_by(_offers.c.provider, _offers.c.region, _offers.c.zone, _offers.c.instance_type)
        )
        with self._read() as conn:
            # Rows were validated as Offer on the way in; constructing skips a second validation.
            return [Offer.model_construct(**row._asdict()) for row in conn.execute(stmt)]

    def offers(
        self,
        gpu: str | None = None,
        gpu_count: float | None = None,
        providers: Sequence[str] | None = None,
        regions: Sequence[str] | None = None,
        spot: bool = False,
        max_hourly: float | None = None,
        limit: int | None = None,
    ) -> list[Offer]:
        """Matching current offers, cheapest first (by spot price with ``spot``).

        Offers without the price being ranked on are left out.
        """
        want_gpu = canonical_gpu(gpu) if gpu else None
        want_providers = {p.strip().lower() for p in providers} if providers else None
        want_regions = {r.strip().lower() for r in regions} if regions else None

        def price(o: Offer) -> float | None:
            return o.spot_price_hour if spot else o.price_hour

        chosen = [
            o
            for o in self.all_offers()
            if (p := price(o)) is not None
            and (want_gpu is None or o.gpu == want_gpu)
            and (gpu_count is None or o.gpu_count == gpu_count)
            and (want_providers is None or o.provider in want_providers)
            and (want_regions is None or o.region.lower() in want_regions)
            and (max_hourly is None or p <= max_hourly)
        ]
        chosen.sort(key=lambda o: (price(o), o.provider, o.region, o.zone or "", o.instance_type))
        return chosen[:limit] if limit is not None else chosen

    def local_builds(self) -> list[LocalBuild]:
        self.ensure_seeded()
        currents = self._currents()
        version = self._version(currents)
        memo = self._builds_memo
        if memo is None or memo[0] != version:
            ids = [c.id for c in currents if c.provider == LOCAL]
            memo = (version, self._load_builds(ids))
            self._builds_memo = memo
        return list(memo[1])

    def _load_builds(self, snapshot_ids: list[int]) -> list[LocalBuild]:
        if not snapshot_ids:
            return []
        stmt = select(_builds).where(_builds.c.snapshot_id.in_(snapshot_ids)).order_by(_builds.c.build_id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [LocalBuild.model_validate({**r.attrs, "parts": r.parts}) for r in rows]

    def local_build(self, build_id: str) -> LocalBuild:
        builds = self.local_builds()
        for build in builds:
            if build.id == build_id:
                return build
        ids = [b.id for b in builds]
        raise InvalidInput("buy.build", f"unknown build {build_id!r}{_did_you_mean(build_id, ids)}")

    def prices_as_of(self) -> dict[str, datetime]:
        self.ensure_seeded()
        return {c.provider: c.as_of for c in self._currents()}

    def snapshot_id(self) -> str:
        """Stable id of the current set of snapshots: equal content gives the same id anywhere."""
        self.ensure_seeded()
        digest = hashlib.sha256()
        for c in self._currents():
            digest.update(f"{c.provider}:{c.content_hash}\n".encode())
        return digest.hexdigest()[:16]

    def status(self, stale_after_days: float) -> list[ProviderStatus]:
        """Per provider: current rows and ``as_of``, last attempt and error, and staleness."""
        self.ensure_seeded()
        now = datetime.now(UTC)
        currents = {c.provider: c for c in self._currents()}
        with self._read() as conn:
            attempts = {r.provider: r for r in conn.execute(select(_status))}
        answer = []
        for provider in sorted(set(currents) | set(attempts)):
            cur = currents.get(provider)
            att = attempts.get(provider)
            age_hours = (now - cur.as_of).total_seconds() / 3600 if cur else None
            answer.append(
                ProviderStatus(
                    provider=provider,
                    rows=cur.row_count if cur else 0,
                    as_of=cur.as_of if cur else None,
                    last_attempt=att.last_attempt if att else None,
                    last_error=att.last_error if att else None,
                    # Staleness is a property of the prices' own date, never of when we looked.
                    stale=age_hours is None or age_hours > stale_after_days * 24,
                    age_hours=round(age_hours, 2) if age_hours is not None else None,
                    snapshot_id=str(cur.id) if cur else None,
                )
            )
        return answer

    def history(
        self, instance_type: str, region: str | None = None, provider: str | None = None
    ) -> list[dict[str, Any]]:
        """Every recorded price of ``instance_type``, oldest snapshot first."""
        self.ensure_seeded()
        stmt = (
            select(
                _snap.c.id.label("snapshot_id"),
                _snap.c.fetched_at,
                _snap.c.is_current,
                _offers.c.provider,
                _offers.c.region,
                _offers.c.zone,
                _offers.c.instance_type,
                _offers.c.gpu,
                _offers.c.gpu_count,
                _offers.c.price_hour,
                _offers.c.spot_price_hour,
                _offers.c.currency,
                _offers.c.price_hour_native,
                _offers.c.source,
                _offers.c.as_of,
            )
            .join(_snap, _snap.c.id == _offers.c.snapshot_id)
            .where(_offers.c.instance_type == instance_type)
            .order_by(_snap.c.fetched_at, _snap.c.id, _offers.c.region, _offers.c.zone)
        )
        if region:
            stmt = stmt.where(_offers.c.region == region)
        if provider:
            stmt = stmt.where(_offers.c.provider == provider.lower())
        with self._read() as conn:
            points = [dict(r._mapping) for r in conn.execute(stmt)]
        if not points and not region and not provider:
            known = sorted({o.instance_type for o in self.all_offers()})
            raise InvalidInput(
                "instance_type",
                f"no prices recorded for {instance_type!r}{_did_you_mean(instance_type, known)}",
            )
        return points

    # -- leases -------------------------------------------------------------------------------

    def try_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take (or renew) the lease ``name`` for ``ttl_s`` seconds; False while another holds it."""
        now = datetime.now(UTC)
        expires = now + timedelta(seconds=ttl_s)
        with self._write() as conn:
            inserted = conn.execute(
                self._upsert(conn, _leases)
                .values(name=name, holder=holder, expires_at=expires)
                .on_conflict_do_nothing(index_elements=["name"])
                .returning(_leases.c.name)
            ).first()
            if inserted is not None:
                return True
            # Taken: ours to renew, or free once expired. The WHERE makes the check and the
            # take one atomic statement.
            taken = conn.execute(
                update(_leases)
                .where(_leases.c.name == name)
                .where((_leases.c.holder == holder) | (_leases.c.expires_at < now))
                .values(holder=holder, expires_at=expires)
            ).rowcount
            return taken == 1

    def release_lease(self, name: str, holder: str) -> None:
        with self._write() as conn:
            conn.execute(delete(_leases).where(_leases.c.name == name, _leases.c.holder == holder))

    def lease_holder(self, name: str) -> str | None:
        with self._read() as conn:
            row = conn.execute(
                select(_leases.c.holder, _leases.c.expires_at).where(_leases.c.name == name)
            ).first()
        if row is None or row.expires_at < datetime.now(UTC):
            return None
        return str(row.holder)
