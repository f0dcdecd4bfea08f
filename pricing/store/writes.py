"""Writing prices: a provider's validated price list as a new current snapshot, in one transaction,
and the outcome of each refresh attempt. Mixed into ``PriceStore``, on its transactions."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from optimizer.errors import InvalidInput
from optimizer.offer import LocalBuild, Offer
from pricing.store.rows import _build_row, _builds, _offer_row, _offers, _runs, _snap, _status, content_hash
from pricing.store.setup import _lock
from pricing.validate import validate_rows

# How many of a provider's latest snapshots the row-collapse guard looks back over.
HISTORY_WINDOW = 10


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
        forced: bool = False,
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
                "forced": forced,
            },
        )
        self._insert_rows(conn, snapshot_id, rows)
        self._flip_current(conn, provider, snapshot_id)
        return snapshot_id

    def _recent_peak(self, conn: Connection, provider: str) -> int | None:
        """The most rows ``provider`` had in its last ``HISTORY_WINDOW`` snapshots, counting back no
        further than its last forced one: what a new list is measured against, so that a run of
        small shrinks cannot walk a provider down to nothing one refresh at a time."""
        recent = conn.execute(
            select(_snap.c.row_count, _snap.c.forced)
            .where(_snap.c.provider == provider)
            .order_by(_snap.c.id.desc())
            .limit(HISTORY_WINDOW)
        ).all()
        peak: int | None = None
        for row in recent:
            peak = max(peak or 0, int(row.row_count))
            if row.forced:
                break
        return peak

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
        (info,) = self.replace_groups(
            {provider: list(rows)}, fetched_at=fetched_at, sources={provider: source},
            force={provider} if force else (), as_of=as_of,
        )
        return info

    def replace_groups(
        self,
        groups: Mapping[str, Sequence[Offer | LocalBuild]],
        *,
        fetched_at: datetime,
        sources: Mapping[str, str],
        force: Collection[str] = (),
        as_of: datetime | None = None,
        fence: tuple[str, str] | None = None,
    ) -> list[SnapshotInfo]:
        """Make each provider's rows in ``groups`` its current price list, all in ONE transaction.

        A source that prices several providers is therefore all-old or all-new, even when the
        process dies half-way. Every provider is validated (against its recent history) before
        anything is written; the first rule broken raises ``ValidationFailed`` and nothing
        changes. ``force`` names the providers whose shrink is deliberate (never to zero rows).
        ``fence`` = (lease, holder): the write happens only while that lease is held.
        """
        self.ensure_seeded()
        if fetched_at.tzinfo is None:
            raise InvalidInput("fetched_at", "must be timezone-aware")
        forced = set(force)
        prepared = []
        for provider in sorted(groups):
            rows = list(groups[provider])
            digest = content_hash(rows)
            snapshot_as_of = as_of or (min(r.as_of for r in rows) if rows else fetched_at)
            prepared.append((provider, rows, digest, snapshot_as_of))
        infos: list[SnapshotInfo] = []
        with self._write() as conn:
            # Sorted, so two writers of overlapping provider sets cannot deadlock.
            for provider, *_ in prepared:
                _lock(conn, f"gpucost:provider:{provider}")
            if fence is not None:
                self._check_fence(conn, *fence)
            currents = {}
            for provider, rows, _, _ in prepared:
                current = self._current_of(conn, provider)
                currents[provider] = current
                validate_rows(
                    provider, rows, previous_rows=self._recent_peak(conn, provider),
                    force=provider in forced,
                )
            for provider, rows, digest, snapshot_as_of in prepared:
                current = currents[provider]
                previous_rows = int(current.row_count) if current else None
                source = sources.get(provider) or provider
                if current is not None and current.content_hash == digest:
                    infos.append(SnapshotInfo(
                        id=int(current.id), provider=provider, fetched_at=fetched_at, as_of=snapshot_as_of,
                        source=source, row_count=len(rows), content_hash=digest, changed=False,
                        previous_rows=previous_rows,
                    ))
                    continue
                snapshot_id = self._write_snapshot(
                    conn, provider, rows, fetched_at=fetched_at, as_of=snapshot_as_of, source=source,
                    digest=digest, forced=provider in forced,
                )
                infos.append(SnapshotInfo(
                    id=snapshot_id, provider=provider, fetched_at=fetched_at, as_of=snapshot_as_of,
                    source=source, row_count=len(rows), content_hash=digest, changed=True,
                    previous_rows=previous_rows,
                ))
        return infos

    # -- refresh runs -------------------------------------------------------------------------

    def start_run(self, source: str, holder: str) -> int:
        """Record that ``holder`` began refreshing ``source``; ``finish_run`` closes the record."""
        with self._write() as conn:
            result = conn.execute(
                insert(_runs)
                .values(source=source, holder=holder, started_at=datetime.now(UTC), status="running")
                .returning(_runs.c.id)
            )
            return int(result.scalar_one())

    def finish_run(self, run_id: int, status: str, detail: str | None = None) -> None:
        with self._write() as conn:
            conn.execute(
                update(_runs)
                .where(_runs.c.id == run_id)
                .values(status=status, finished_at=datetime.now(UTC), detail=detail[:4000] if detail else None)
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
