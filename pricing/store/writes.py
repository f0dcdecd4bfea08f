"""Writing prices: a provider's validated price list as a new current snapshot, in one transaction,
and the outcome of each refresh attempt. Mixed into ``PriceStore``, on its transactions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from optimizer.errors import InvalidInput
from pricing.offer import LocalBuild, Offer
from pricing.store.rows import _build_row, _builds, _offer_row, _offers, _snap, _status, content_hash
from pricing.store.setup import _lock
from pricing.validate import validate_rows


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


class Writes:
    """Snapshot and refresh-attempt writes of ``PriceStore``."""

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
