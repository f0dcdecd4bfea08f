"""The refresh pipeline: per source fetch -> parse -> validate -> store, each provider on its own.

A provider that fails in any way (credentials aside) keeps its last good rows and has the error
recorded in its status; the other providers carry on. Only ``fetch`` does I/O, so only ``fetch``
is retried, and only on errors the adapter marked retriable (throttling, timeouts).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from optimizer.errors import InvalidInput, MissingCredentials, ProviderError, StoreError
from pricing.offer import LocalBuild, Offer
from pricing.source import PriceSource, RawSnapshot, SourceSettings, registered_sources
from pricing.store.repository import PriceStore, SnapshotInfo
from pricing.validate import validate_rows

logger = logging.getLogger(__name__)

REFRESH_LEASE = "refresh"
REFRESH_LEASE_TTL_S = 3600.0
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
    for attempt in retrying:
        with attempt:
            on_attempt(attempt.retry_state.attempt_number)
            raw = source.fetch()
    return raw


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


def validate_groups(
    store: PriceStore, groups: Mapping[str, Sequence[Offer | LocalBuild]], *, force: bool = False
) -> None:
    """Validate every provider's rows against its last good snapshot, before any is written."""
    for provider, group in sorted(groups.items()):
        validate_rows(provider, group, previous_rows=store.current_rows(provider), force=force)


def store_rows(
    store: PriceStore,
    source_name: str,
    rows: Sequence[Offer | LocalBuild],
    *,
    fetched_at: datetime,
    force: bool = False,
    source: str | None = None,
    progress: Progress | None = None,
) -> list[SnapshotInfo]:
    """Write ``rows`` as one new snapshot per provider they belong to.

    All providers are validated before any is written, so one bad cloud in a multi-cloud file
    changes nothing. (``replace_rows`` validates again inside its transaction.)
    """
    report = progress or _no_progress
    report(source_name, "validate")
    groups = group_by_provider(source_name, rows)
    validate_groups(store, groups, force=force)
    report(source_name, "store")
    return [
        store.replace_rows(
            provider, group, fetched_at=fetched_at, force=force,
            source=source or _source_label(group, source_name),
        )
        for provider, group in sorted(groups.items())
    ]


def _refresh_one(
    store: PriceStore, name: str, factory: SourceLike | PriceSource, settings: SourceSettings, force: bool,
    progress: Progress,
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
        infos = store_rows(store, name, rows, fetched_at=raw.fetched_at, force=force, progress=progress)
    except MissingCredentials as exc:
        progress(name, "skipped")
        return [RefreshResult(provider=name, status="skipped", note=exc.reason, seconds=elapsed())]
    except Exception as exc:  # noqa: BLE001 - any failure keeps the provider's last good rows
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


def refresh(
    store: PriceStore,
    settings: SourceSettings,
    providers: Sequence[str] | None = None,
    force: bool = False,
    progress: Progress | None = None,
    sources: Mapping[str, SourceLike] | None = None,
) -> list[RefreshResult]:
    """Refresh ``providers`` (default: every registered source), one after the other.

    Never raises for a provider's failure: each one's outcome is in the returned results.
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
    store.ensure_seeded()
    results: list[RefreshResult] = []
    for name in chosen:
        results.extend(_refresh_one(store, name, available[name], settings, force, progress or _no_progress))
    return results


def refresh_exclusive(
    store: PriceStore,
    settings: SourceSettings,
    providers: Sequence[str] | None = None,
    force: bool = False,
    progress: Progress | None = None,
    sources: Mapping[str, SourceLike] | None = None,
    holder: str | None = None,
) -> list[RefreshResult]:
    """``refresh`` under the store's refresh lease; ``RefreshBusy`` if another one runs."""
    holder = holder or lease_holder_id()
    if not store.try_lease(REFRESH_LEASE, holder, REFRESH_LEASE_TTL_S):
        raise RefreshBusy(store.lease_holder(REFRESH_LEASE) or "unknown")
    try:
        return refresh(store, settings, providers, force=force, progress=progress, sources=sources)
    finally:
        store.release_lease(REFRESH_LEASE, holder)
