"""Named leases with an expiry, so that one process at a time runs a price refresh. Mixed into
``PriceStore``, on its transactions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select, update

from pricing.store.rows import _leases


class Leases:
    """Lease queries of ``PriceStore``."""

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
