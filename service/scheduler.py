"""The in-process nightly refresh of ``gpucost serve`` (``GPUCOST_REFRESH_CRON``).

Every replica schedules the job; the lease row in the store lets only one of them refresh at a
time, so several API replicas on one PostgreSQL refresh once, not once each.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from optimizer.errors import InvalidInput
from pricing.refresh import RefreshBusy, lease_holder_id, refresh_exclusive

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from pricing.store.repository import PriceStore
    from service.settings import Settings

logger = logging.getLogger(__name__)

JOB_ID = "gpucost-refresh"


def parse_cron(expr: str) -> Any:
    """A UTC ``CronTrigger`` from a five-field crontab line, or ``InvalidInput``."""
    from apscheduler.triggers.cron import CronTrigger

    try:
        return CronTrigger.from_crontab(expr, timezone="UTC")
    except ValueError as exc:
        raise InvalidInput(
            "GPUCOST_REFRESH_CRON",
            f"{expr!r} is not a five-field crontab expression (minute hour day month weekday, "
            f"e.g. '0 3 * * *'): {exc}",
        ) from None


def run_scheduled_refresh(
    settings: Settings, store: PriceStore, holder: str, sources: Mapping[str, Any] | None = None
) -> list[Any]:
    """One scheduled refresh; a replica that finds the lease taken does nothing."""
    try:
        results = refresh_exclusive(store, settings.source_settings(), holder=holder, sources=sources)
    except RefreshBusy as exc:
        logger.info("scheduled refresh skipped: %s", exc, extra={"event": "scheduled_refresh", "skipped": True})
        return []
    except Exception:  # noqa: BLE001 - a failed night must not kill the scheduler thread
        logger.exception("scheduled refresh failed", extra={"event": "scheduled_refresh"})
        return []
    failed = [r.provider for r in results if r.status == "failed"]
    logger.log(
        logging.WARNING if failed else logging.INFO,
        "scheduled refresh finished: %d sources, %d failed%s", len(results), len(failed),
        f" ({', '.join(failed)})" if failed else "",
        extra={"event": "scheduled_refresh", "results": {r.provider: r.status for r in results}},
    )
    return results


def start_scheduler(settings: Settings, store: PriceStore) -> BackgroundScheduler | None:
    """Start the cron job if ``settings.refresh_cron`` is set; None otherwise."""
    if not settings.refresh_cron:
        return None
    from apscheduler.schedulers.background import BackgroundScheduler

    trigger = parse_cron(settings.refresh_cron)
    holder = lease_holder_id()
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(
        run_scheduled_refresh,
        trigger,
        args=(settings, store, holder),
        id=JOB_ID,
        max_instances=1,
        coalesce=True,
        # A replica that was down at 03:00 still refreshes if it comes back within the hour.
        misfire_grace_time=3600,
    )
    scheduler.start()
    logger.info("price refresh scheduled (%s UTC) as %s", settings.refresh_cron, holder)
    return scheduler


def stop_scheduler(handle: BackgroundScheduler | None) -> None:
    if handle is not None and handle.running:
        handle.shutdown(wait=False)
