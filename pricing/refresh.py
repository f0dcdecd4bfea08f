"""The refresh pipeline: per source fetch -> parse -> validate -> store, each source on its own.

A source that fails in any way (credentials aside) keeps its last good rows and has the error
recorded in its status; the other sources carry on. Only ``fetch`` does I/O, so only ``fetch``
is retried, and only on errors the adapter marked retriable (throttling, timeouts); a fetch that
hangs is abandoned after ``fetch_timeout_s``.

Integrity:

- One transaction per source: a source that prices several providers (a SkyPilot catalog) makes
  all of them new or leaves all of them old, even if the process is killed half-way.
- ``refresh_exclusive`` runs under the store's ``refresh`` lease with a short TTL that a
  heartbeat thread renews; a holder that dies stops renewing and the lease is free again within
  ``REFRESH_LEASE_TTL_S``. Each write checks the lease inside its transaction, so a holder that
  lost it (stalled past the TTL) writes nothing.
- Every source's attempt is recorded in ``refresh_runs`` when it starts and when it ends; one that
  never ended is reported by ``prices status`` as aborted.
- ``force`` names providers (or sources): only their deliberate shrink is let through, and never
  to an empty list.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from optimizer.errors import InvalidInput, MissingCredentials, ProviderError, StoreError
from optimizer.offer import LocalBuild, Offer
from pricing.source import PriceSource, RawSnapshot, SourceSettings, registered_sources
from pricing.store.leases import REFRESH_LEASE
from pricing.store.repository import PriceStore, SnapshotInfo

logger = logging.getLogger(__name__)

# Short on purpose: a dead holder blocks refreshes for at most this long. The heartbeat renews it
# every third of it, so a live refresh of any length keeps it.
REFRESH_LEASE_TTL_S = 30.0
HEARTBEAT_S = REFRESH_LEASE_TTL_S / 3
DEFAULT_FETCH_TIMEOUT_S = 900.0
# Overridable through SourceSettings.extra (tests use tiny waits).
DEFAULT_ATTEMPTS = 4
DEFAULT_WAIT_S = 2.0
DEFAULT_MAX_WAIT_S = 60.0

Stage = Literal["start", "fetch", "parse", "validate", "store", "done", "skipped", "failed"]
STAGES: tuple[Stage, ...] = ("fetch", "parse", "validate", "store")


class Progress(Protocol):
    def __call__(self, provider: str, stage: Stage) -> None: ...


SourceLike = type[PriceSource] | Callable[[SourceSettings], PriceSource]


class RefreshResult(BaseModel):
    provider: str
    status: Literal["updated", "unchanged", "skipped", "failed"]
    rows: int = 0
    previous_rows: int | None = None
    snapshot: int | None = None
    attempts: int = 0
    seconds: float = 0.0
    error: str | None = None
    note: str | None = None


class RefreshSummary(BaseModel):
    """Per provider, in words: what was refreshed, what was skipped and why, what failed."""

    refreshed: list[str]
    skipped: dict[str, str]
    failed: dict[str, str]

    @property
    def nothing_refreshed(self) -> bool:
        return not self.refreshed


def refresh_summary(results: Sequence[RefreshResult]) -> RefreshSummary:
    """``updated`` and ``unchanged`` both mean the provider's API answered and its prices are current."""
    return RefreshSummary(
        refreshed=[r.provider for r in results if r.status in ("updated", "unchanged")],
        skipped={r.provider: r.note or "skipped" for r in results if r.status == "skipped"},
        failed={r.provider: r.error or "failed" for r in results if r.status == "failed"},
    )


def summary_line(summary: RefreshSummary) -> str:
    parts = [f"refreshed: {', '.join(summary.refreshed) or 'none'}"]
    parts += [f"skipped {p} ({why})" for p, why in summary.skipped.items()]
    parts += [f"failed {p} ({why})" for p, why in summary.failed.items()]
    return "; ".join(parts)


class RefreshBusy(StoreError):
    def __init__(self, holder: str) -> None:
        self.holder = holder
        super().__init__(f"another refresh is running (lease held by {holder})")


def lease_holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _make_source(factory: SourceLike | PriceSource, settings: SourceSettings) -> PriceSource:
    if not isinstance(factory, type) and hasattr(factory, "fetch") and hasattr(factory, "parse"):
        # Already a source (tests, or a caller with its own clients): never rebuild it from the
        # environment, which could reach a real provider.
        return factory  # type: ignore[return-value]
    from_settings = getattr(factory, "from_settings", None)
    if from_settings is not None:
        return from_settings(settings)  # type: ignore[no-any-return]
    return factory(settings)  # type: ignore[call-arg,return-value]


def _retriable(exc: BaseException) -> bool:
    return isinstance(exc, ProviderError) and exc.retriable


def _fetch_with_retries(
    source: PriceSource, settings: SourceSettings, on_attempt: Callable[[int], None]
) -> RawSnapshot:
    """``source.fetch()`` with retries; ``on_attempt`` hears each attempt's number, so the count
    survives a fetch that finally fails."""
    attempts = int(settings.extra.get("retry_attempts", DEFAULT_ATTEMPTS))
    wait_s = float(settings.extra.get("retry_wait_s", DEFAULT_WAIT_S))
    max_wait_s = float(settings.extra.get("retry_max_wait_s", DEFAULT_MAX_WAIT_S))

    def _log(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        logger.warning("%s: fetch attempt %d failed (%s); retrying", source.name, state.attempt_number, exc)

    retrying = Retrying(
        retry=retry_if_exception(_retriable),
        stop=stop_after_attempt(max(1, attempts)),
        wait=wait_exponential(multiplier=wait_s, max=max_wait_s),
        before_sleep=_log,
        reraise=True,
    )
    timeout_s = float(settings.extra.get("fetch_timeout_s", DEFAULT_FETCH_TIMEOUT_S))
    for attempt in retrying:
        with attempt:
            on_attempt(attempt.retry_state.attempt_number)
            raw = _fetch_within(source, timeout_s)
    return raw


def _fetch_within(source: PriceSource, timeout_s: float) -> RawSnapshot:
    """``source.fetch()``, abandoned after ``timeout_s``: a provider that never answers must not
    hold the refresh lease (which the heartbeat keeps alive) for ever."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["raw"] = source.fetch()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["exc"] = exc

    worker = threading.Thread(target=run, name=f"fetch-{source.name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise ProviderError(source.name, f"fetch did not finish within {timeout_s:g} s", retriable=False)
    if "exc" in box:
        raise box["exc"]
    return box["raw"]  # type: ignore[no-any-return]


def _source_label(rows: Sequence[Offer | LocalBuild], fallback: str) -> str:
    counts = Counter(r.source for r in rows)
    if not counts:
        return fallback
    label = counts.most_common(1)[0][0]
    return label if len(counts) == 1 else f"{label} (+{len(counts) - 1} more)"


def group_by_provider(source_name: str, rows: Sequence[Offer | LocalBuild]) -> dict[str, list[Any]]:
    """Rows per provider: builds belong to ``local``; offers to their own provider.

    One source may price several clouds (a SkyPilot catalog does).
    """
    groups: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        groups["local" if isinstance(row, LocalBuild) else row.provider].append(row)
    if not groups:
        groups[source_name] = []
    return dict(groups)


def _forced_providers(
    source_name: str, groups: Mapping[str, Sequence[Any]], force: bool | Collection[str]
) -> set[str]:
    """The providers of this source whose shrink is deliberate: all of them when the source itself
    (or ``True``) is forced, else those named."""
    if force is True:
        return set(groups)
    if not force:
        return set()
    named = set(force)  # type: ignore[arg-type]
    return set(groups) if source_name in named else set(groups) & named


def store_rows(
    store: PriceStore,
    source_name: str,
    rows: Sequence[Offer | LocalBuild],
    *,
    fetched_at: datetime,
    force: bool | Collection[str] = False,
    source: str | None = None,
    progress: Progress | None = None,
    fence: tuple[str, str] | None = None,
) -> list[SnapshotInfo]:
    """Write ``rows`` as one new snapshot per provider they belong to, in one transaction.

    Every provider is validated before any is written, so one bad cloud in a multi-cloud file
    changes nothing, and a crash half-way leaves them all on their old prices.
    """
    report = progress or _no_progress
    report(source_name, "validate")
    groups = group_by_provider(source_name, rows)
    report(source_name, "store")
    return store.replace_groups(
        groups,
        fetched_at=fetched_at,
        sources={p: source or _source_label(g, source_name) for p, g in groups.items()},
        force=_forced_providers(source_name, groups, force),
        fence=fence,
    )


def _log_outcome(result: RefreshResult) -> None:
    level = logging.WARNING if result.status == "failed" else logging.INFO
    logger.log(
        level, "refresh %s: %s rows=%d %s", result.provider, result.status, result.rows,
        result.error or result.note or "",
        extra={
            "event": "refresh", "provider": result.provider, "status": result.status, "rows": result.rows,
            "previous_rows": result.previous_rows, "seconds": result.seconds, "error": result.error,
        },
    )


def _refresh_one(
    store: PriceStore, name: str, factory: SourceLike | PriceSource, settings: SourceSettings,
    force: bool | Collection[str], progress: Progress, holder: str, fence: tuple[str, str] | None,
) -> list[RefreshResult]:
    run_id = store.start_run(name, holder)
    results = _refresh_source(store, name, factory, settings, force, progress, fence)
    statuses = {r.status for r in results}
    overall = "failed" if "failed" in statuses else "updated" if "updated" in statuses else results[0].status
    store.finish_run(run_id, overall, "; ".join(r.error for r in results if r.error) or None)
    for r in results:
        _log_outcome(r)
    return results


def _refresh_source(
    store: PriceStore, name: str, factory: SourceLike | PriceSource, settings: SourceSettings,
    force: bool | Collection[str], progress: Progress, fence: tuple[str, str] | None,
) -> list[RefreshResult]:
    started = time.perf_counter()
    attempts = 0

    def elapsed() -> float:
        return round(time.perf_counter() - started, 3)

    def count(n: int) -> None:
        nonlocal attempts
        attempts = n

    progress(name, "start")
    try:
        source = _make_source(factory, settings)
    except MissingCredentials as exc:
        progress(name, "skipped")
        return [RefreshResult(provider=name, status="skipped", note=exc.reason, seconds=elapsed())]
    try:
        progress(name, "fetch")
        raw = _fetch_with_retries(source, settings, count)
        progress(name, "parse")
        rows = source.parse(raw)
        infos = store_rows(
            store, name, rows, fetched_at=raw.fetched_at, force=force, progress=progress, fence=fence
        )
    except MissingCredentials as exc:
        progress(name, "skipped")
        return [RefreshResult(provider=name, status="skipped", note=exc.reason, seconds=elapsed())]
    except Exception as exc:  # noqa: BLE001 - any failure keeps the source's last good rows
        message = f"{type(exc).__name__}: {exc}"
        logger.warning("refresh of %s failed, keeping its last good prices: %s", name, message)
        store.record_attempt(name, message)
        progress(name, "failed")
        return [RefreshResult(provider=name, status="failed", error=message, attempts=attempts, seconds=elapsed())]
    results = []
    for info in infos:
        store.record_attempt(info.provider, None)
        results.append(
            RefreshResult(
                provider=info.provider,
                status="updated" if info.changed else "unchanged",
                rows=info.row_count,
                previous_rows=info.previous_rows,
                snapshot=info.id,
                attempts=attempts,
                seconds=elapsed(),
                note=None if info.provider == name else f"from source {name}",
            )
        )
    progress(name, "done")
    return results


def _no_progress(provider: str, stage: Stage) -> None:
    return None


def _check_force(
    force: bool | Collection[str], chosen: Sequence[str], named: bool
) -> bool | Collection[str]:
    """``force=True`` means the sources named in this run (or the only one): never every source."""
    if force is not True:
        return force
    if named or len(chosen) == 1:
        return set(chosen)
    raise InvalidInput("force", "force applies per provider: name the providers whose shrink is deliberate")


def refresh(
    store: PriceStore,
    settings: SourceSettings,
    providers: Sequence[str] | None = None,
    force: bool | Collection[str] = False,
    progress: Progress | None = None,
    sources: Mapping[str, SourceLike] | None = None,
    *,
    holder: str | None = None,
    lease: LeaseKeeper | None = None,
) -> list[RefreshResult]:
    """Refresh ``providers`` (default: every registered source), one after the other.

    ``force``: the providers (or sources) allowed to shrink by more than half; ``True`` means the
    one source being refreshed. Never raises for a source's failure: each one's outcome is in the
    returned results.
    """
    available: Mapping[str, SourceLike] = sources if sources is not None else registered_sources()
    if providers:
        unknown = [p for p in providers if p not in available]
        if unknown:
            raise InvalidInput(
                "provider", f"unknown source {unknown[0]!r}; known: {', '.join(sorted(available)) or 'none'}"
            )
        chosen = list(dict.fromkeys(providers))
    else:
        chosen = sorted(available)
    force = _check_force(force, chosen, named=bool(providers))
    holder = holder or (lease.holder if lease else lease_holder_id())
    fence = (lease.name, lease.holder) if lease else None
    store.ensure_seeded()
    results: list[RefreshResult] = []
    for name in chosen:
        if lease is not None and lease.lost.is_set():
            results.append(RefreshResult(provider=name, status="failed", error=f"LeaseLost: {lease.lost_reason}"))
            continue
        results.extend(
            _refresh_one(store, name, available[name], settings, force, progress or _no_progress, holder, fence)
        )
    return results


class LeaseKeeper:
    """A held lease and the heartbeat thread that renews it every ``heartbeat_s``."""

    def __init__(self, store: PriceStore, name: str, holder: str, ttl_s: float, heartbeat_s: float) -> None:
        self.store, self.name, self.holder = store, name, holder
        self.ttl_s, self.heartbeat_s = ttl_s, heartbeat_s
        self.lost = threading.Event()
        self.lost_reason = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{name}", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                held = self.store.renew_lease(self.name, self.holder, self.ttl_s)
            except Exception as exc:  # noqa: BLE001 - a store hiccup: try again next beat
                logger.warning("lease %s: heartbeat failed (%s)", self.name, exc)
                continue
            if not held:
                self.lost_reason = f"lease {self.name!r} expired or was taken over"
                logger.error("lease %s lost by %s; the refresh stops writing", self.name, self.holder)
                self.lost.set()
                return

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.heartbeat_s + 5)


@contextmanager
def held_lease(
    store: PriceStore, name: str, holder: str, ttl_s: float = REFRESH_LEASE_TTL_S,
    heartbeat_s: float | None = None,
) -> Iterator[LeaseKeeper]:
    """Hold lease ``name`` for the block (renewed by a heartbeat); ``RefreshBusy`` if taken."""
    if not store.try_lease(name, holder, ttl_s):
        raise RefreshBusy(store.lease_holder(name) or "unknown")
    keeper = LeaseKeeper(store, name, holder, ttl_s, heartbeat_s or ttl_s / 3)
    keeper.start()
    try:
        yield keeper
    finally:
        keeper.stop()
        try:
            store.release_lease(name, holder)
        except Exception as exc:  # noqa: BLE001 - it expires on its own within one TTL
            logger.warning("lease %s: release failed (%s); it expires within %g s", name, exc, ttl_s)


def refresh_exclusive(
    store: PriceStore,
    settings: SourceSettings,
    providers: Sequence[str] | None = None,
    force: bool | Collection[str] = False,
    progress: Progress | None = None,
    sources: Mapping[str, SourceLike] | None = None,
    holder: str | None = None,
    *,
    ttl_s: float = REFRESH_LEASE_TTL_S,
) -> list[RefreshResult]:
    """``refresh`` under the store's refresh lease; ``RefreshBusy`` if another one runs."""
    holder = holder or lease_holder_id()
    with held_lease(store, REFRESH_LEASE, holder, ttl_s) as lease:
        return refresh(store, settings, providers, force=force, progress=progress, sources=sources, lease=lease)
