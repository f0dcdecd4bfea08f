"""Named leases with a short expiry that their holder keeps renewing, so that one process at a time
runs a price refresh and a holder that dies (SIGKILL, OOM, power cut) loses the lease within one
TTL. Mixed into ``PriceStore``, on its transactions.

A lease row holds its holder, when it was taken, the last heartbeat and when it expires. Taking it
is one atomic statement (insert, or update where expired or ours); writes made under a lease check
it inside their own transaction (``_check_fence``), so a holder that stalled past its expiry and
lost the lease cannot commit over its successor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, delete, select, update

from optimizer.errors import StoreError
from pricing.store.db_clock import db_now
from pricing.store.rows import _leases

# The lease a price refresh runs under (``pricing.refresh``); status reads it too.
REFRESH_LEASE = "refresh"


class LeaseLost(StoreError):
    """The writer no longer holds the lease it works under; its write was not made."""

    def __init__(self, name: str, holder: str) -> None:
        self.name = name
        self.holder = holder
        super().__init__(f"lease {name!r} is no longer held by {holder} (expired or taken over); nothing written")


@dataclass(frozen=True)
class LeaseInfo:
    name: str
    holder: str
    acquired_at: datetime | None
    heartbeat_at: datetime | None
    expires_at: datetime
    # The database's time when the row was read: what ``alive()`` judges by (not this process's).
    read_at: datetime | None = None

    def alive(self, now: datetime | None = None) -> bool:
        return _aware(self.expires_at) > (now or self.read_at or datetime.now(UTC))


def _aware(value: datetime) -> datetime:
    # SQLite hands back naive datetimes for what was stored as UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class Leases:
    """Lease queries of ``PriceStore``."""

    def try_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take (or renew) the lease ``name`` for ``ttl_s`` seconds; False while another holds it.

        Every time is the database's (``db_now``), so replicas with skewed clocks agree."""
        # A read first: a live lease of someone else is the common answer, and on SQLite a write
        # would queue behind the holder's own write transaction (WAL readers never wait).
        current = self.lease_info(name)
        if current is not None and current.holder != holder and current.alive():
            return False
        with self._write() as conn:
            now = db_now(conn)
            expires = now + timedelta(seconds=ttl_s)
            inserted = conn.execute(
                self._upsert(conn, _leases)
                .values(name=name, holder=holder, expires_at=expires, acquired_at=now, heartbeat_at=now)
                .on_conflict_do_nothing(index_elements=["name"])
                .returning(_leases.c.name)
            ).first()
            if inserted is not None:
                return True
            # Ours: renew it. Expired: take it over as new. The WHERE makes check and take atomic.
            renewed = conn.execute(
                update(_leases)
                .where(_leases.c.name == name, _leases.c.holder == holder)
                .values(expires_at=expires, heartbeat_at=now)
            ).rowcount
            if renewed == 1:
                return True
            taken = conn.execute(
                update(_leases)
                .where(_leases.c.name == name, _leases.c.expires_at < now)
                .values(holder=holder, expires_at=expires, acquired_at=now, heartbeat_at=now)
            ).rowcount
            return taken == 1

    def renew_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Extend a lease ``holder`` still holds; False when it is gone or someone else's.

        A lease past its expiry that nobody took over is still the holder's (on SQLite its own long
        write transaction can hold off the heartbeat); a take-over changes the holder."""
        with self._write() as conn:
            now = db_now(conn)
            renewed = conn.execute(
                update(_leases)
                .where(_leases.c.name == name, _leases.c.holder == holder)
                .values(expires_at=now + timedelta(seconds=ttl_s), heartbeat_at=now)
            ).rowcount
        return renewed == 1

    def release_lease(self, name: str, holder: str) -> None:
        with self._write() as conn:
            conn.execute(delete(_leases).where(_leases.c.name == name, _leases.c.holder == holder))

    def lease_info(self, name: str) -> LeaseInfo | None:
        """The lease row, live or expired (an expired one is what a dead holder left behind)."""
        with self._read() as conn:
            row = conn.execute(select(_leases).where(_leases.c.name == name)).first()
            read_at = db_now(conn)
        if row is None:
            return None
        return LeaseInfo(
            name=row.name, holder=row.holder, acquired_at=row.acquired_at,
            heartbeat_at=row.heartbeat_at, expires_at=row.expires_at, read_at=read_at,
        )

    def lease_holder(self, name: str) -> str | None:
        info = self.lease_info(name)
        if info is None or not info.alive():
            return None
        return info.holder

    def _check_fence(self, conn: Connection, name: str, holder: str) -> None:
        """Inside a write transaction: raise ``LeaseLost`` unless ``name`` is still ``holder``'s.

        On PostgreSQL the row stays locked until commit, so nobody can take the lease between the
        check and the write; on SQLite the transaction already holds the database's write lock.
        """
        # The holder, not the expiry, decides: past its expiry but not taken over, nobody else
        # is writing, and only a take-over (which changes the holder) makes this write wrong.
        stmt = select(_leases.c.holder).where(_leases.c.name == name, _leases.c.holder == holder)
        if conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update()
        if conn.execute(stmt).first() is None:
            raise LeaseLost(name, holder)
