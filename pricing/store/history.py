"""The store's record of the past: each provider's refresh status and every recorded price of an
instance. Mixed into ``PriceStore``, on its transactions and current-price reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from optimizer.errors import InvalidInput
from pricing.store.reads import _did_you_mean
from pricing.store.rows import _offers, _runs, _snap, _status
from pricing.store.leases import REFRESH_LEASE
from pricing.status import ProviderStatus


class History:
    """Refresh status and price history queries of ``PriceStore``."""

    def status(self, stale_after_days: float) -> list[ProviderStatus]:
        """Per provider: current rows and ``as_of``, last attempt and error, and staleness."""
        self.ensure_seeded()
        now = datetime.now(UTC)
        currents = {c.provider: c for c in self._currents()}
        with self._read() as conn:
            attempts = {r.provider: r for r in conn.execute(select(_status))}
        aborted: dict[str, datetime] = {}
        for run in self.refresh_runs(limit=200):
            if run["status"] == "aborted":
                aborted.setdefault(run["source"], run["started_at"])
        answer = []
        for provider in sorted(set(currents) | set(attempts) | set(aborted)):
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
                    last_aborted=aborted.get(provider),
                )
            )
        return answer

    def refresh_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The latest refresh attempts per source, newest first. One still ``running`` whose holder
        no longer holds a live refresh lease died half-way: it is reported as ``aborted``."""
        live = self.lease_holder(REFRESH_LEASE)
        with self._read() as conn:
            rows = conn.execute(select(_runs).order_by(_runs.c.id.desc()).limit(limit)).all()
        runs = []
        for r in rows:
            status = r.status
            if status == "running" and r.holder != live:
                status = "aborted"
            runs.append({
                "source": r.source, "holder": r.holder, "started_at": r.started_at,
                "finished_at": r.finished_at, "status": status, "detail": r.detail,
            })
        return runs

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
