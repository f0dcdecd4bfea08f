"""The store's record of the past: each provider's refresh status and every recorded price of an
instance. Mixed into ``PriceStore``, on its transactions and current-price reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from optimizer.errors import InvalidInput
from pricing.store.reads import _did_you_mean
from pricing.store.rows import _offers, _snap, _status
from service.schemas import ProviderStatus


class History:
    """Refresh status and price history queries of ``PriceStore``."""

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
