"""The refresh pipeline under faults, on SQLite and PostgreSQL: good prices are never lost."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from optimizer.errors import InvalidInput, MissingCredentials, ProviderError
from optimizer.offer import Offer
from pricing.refresh import REFRESH_LEASE, RefreshBusy, refresh, refresh_exclusive, store_rows
from pricing.source import RawSnapshot, SourceSettings
from pricing.store.repository import PriceStore, open_store
from pricing.validate import ValidationFailed
from service.scheduler import parse_cron, run_scheduled_refresh, start_scheduler, stop_scheduler
from service.settings import Settings
from tests.integration._pricestore import (
    BACKENDS,
    FAST_RETRIES,
    FakeSource,
    backend_url,
    catalog_offers,
    scaled,
)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PriceStore]:
    with backend_url(request, tmp_path, request.param) as url:
        s = open_store(url)
        yield s
        s.close()


def _served(store: PriceStore, provider: str) -> dict[tuple[str, str, str, str], float | None]:
    return {o.key: o.price_hour for o in store.all_offers() if o.provider == provider}


def _status(store: PriceStore, provider: str) -> object:
    return next(p for p in store.status(3) if p.provider == provider)


def _primed(store: PriceStore, provider: str) -> list[Offer]:
    """Load ``provider``'s catalog rows as its last good snapshot."""
    rows = catalog_offers(provider)
    store.replace_rows(provider, rows, fetched_at=datetime.now(UTC), source="catalog")
    return rows


def test_refresh_stores_every_source_and_reports_row_counts(store: PriceStore) -> None:
    aws, gcp = catalog_offers("aws"), catalog_offers("gcp")
    sources = {"aws": FakeSource("aws", aws).factory(), "gcp": FakeSource("gcp", gcp).factory()}
    results = refresh(store, FAST_RETRIES, sources=sources)
    assert [(r.provider, r.status, r.rows, r.attempts) for r in results] == [
        ("aws", "updated", len(aws), 1), ("gcp", "updated", len(gcp), 1),
    ]
    assert _served(store, "aws") == {o.key: o.price_hour for o in aws}
    again = refresh(store, FAST_RETRIES, providers=["aws"], sources=sources)
    assert [(r.provider, r.status) for r in again] == [("aws", "unchanged")]


def test_throttling_is_retried_with_backoff(store: PriceStore) -> None:
    throttled = ProviderError("aws", "ThrottlingException: Rate exceeded", retriable=True)
    source = FakeSource("aws", catalog_offers("aws"), faults=[throttled, throttled, None])
    (result,) = refresh(store, FAST_RETRIES, sources={"aws": source.factory()})
    assert result.status == "updated" and result.attempts == 3 and source.fetches == 3
    assert _status(store, "aws").last_error is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "faults",
    [
        pytest.param([ProviderError("aws", "read timeout", retriable=True)] * 3, id="timeouts-exhaust-retries"),
        pytest.param([TimeoutError("connect timed out")], id="raw-timeout-not-retried"),
        pytest.param([ProviderError("aws", "AccessDenied", retriable=False)], id="fatal-provider-error"),
    ],
)
def test_failed_fetch_keeps_last_good_prices(store: PriceStore, faults: list[BaseException]) -> None:
    good = _primed(store, "aws")
    source = FakeSource("aws", scaled(good, 0.5, datetime.now(UTC)), faults=list(faults))
    (result,) = refresh(store, FAST_RETRIES, sources={"aws": source.factory()})
    assert result.status == "failed" and source.fetches == len(faults)
    assert _served(store, "aws") == {o.key: o.price_hour for o in good}
    status = _status(store, "aws")
    assert status.rows == len(good) and status.last_error == result.error  # type: ignore[attr-defined]
    assert str(faults[0]) in (result.error or "")


def test_malformed_payload_keeps_last_good_prices(store: PriceStore) -> None:
    good = _primed(store, "lambda")

    def parse_garbage(raw: RawSnapshot) -> list[Offer]:
        return [Offer.model_validate(o) for o in json.loads('{"offers": [{"provider": "lambda", "price_ho')]

    source = FakeSource("lambda", good, parse_hook=parse_garbage)
    (result,) = refresh(store, FAST_RETRIES, sources={"lambda": source.factory()})
    assert result.status == "failed" and "JSONDecodeError" in (result.error or "")
    assert _served(store, "lambda") == {o.key: o.price_hour for o in good}
    assert _status(store, "lambda").last_error == result.error  # type: ignore[attr-defined]


def test_empty_or_truncated_page_is_refused_unless_forced(store: PriceStore) -> None:
    good = _primed(store, "runpod")
    empty = FakeSource("runpod", [])
    (result,) = refresh(store, FAST_RETRIES, sources={"runpod": empty.factory()})
    assert result.status == "failed" and "'empty'" in (result.error or "")

    truncated = FakeSource("runpod", good[: len(good) // 4])
    (result,) = refresh(store, FAST_RETRIES, sources={"runpod": truncated.factory()})
    assert result.status == "failed" and "'row_collapse'" in (result.error or "")
    assert len(_served(store, "runpod")) == len(good)

    (forced,) = refresh(store, FAST_RETRIES, force=True, sources={"runpod": truncated.factory()})
    assert forced.status == "updated" and forced.rows == len(good) // 4 and forced.previous_rows == len(good)
    assert len(_served(store, "runpod")) == len(good) // 4


def test_one_provider_failing_leaves_the_others_refreshed(store: PriceStore) -> None:
    gcp_good = _primed(store, "gcp")
    aws_new = catalog_offers("aws")
    sources = {
        "aws": FakeSource("aws", aws_new).factory(),
        "gcp": FakeSource("gcp", gcp_good, faults=[ProviderError("gcp", "503 Service Unavailable")]).factory(),
    }
    results = {r.provider: r for r in refresh(store, FAST_RETRIES, sources=sources)}
    assert results["aws"].status == "updated" and results["gcp"].status == "failed"
    assert _served(store, "aws") == {o.key: o.price_hour for o in aws_new}
    assert _served(store, "gcp") == {o.key: o.price_hour for o in gcp_good}
    flags = {p.provider: p.last_error for p in store.status(3)}
    assert flags["aws"] is None and "503" in (flags["gcp"] or "")


def test_crash_between_fetch_and_commit_keeps_last_good_prices(
    store: PriceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _primed(store, "aws")
    original = store._insert_rows

    def crash_after_rows(conn: object, snapshot_id: int, rows: list[Offer]) -> None:
        original(conn, snapshot_id, rows)  # type: ignore[arg-type]
        raise OSError("worker killed after writing rows, before the commit")

    monkeypatch.setattr(store, "_insert_rows", crash_after_rows)
    source = FakeSource("aws", scaled(good, 1.25, datetime.now(UTC)))
    (result,) = refresh(store, FAST_RETRIES, sources={"aws": source.factory()})
    monkeypatch.undo()
    assert result.status == "failed" and "worker killed" in (result.error or "")
    assert _served(store, "aws") == {o.key: o.price_hour for o in good}
    assert "worker killed" in (_status(store, "aws").last_error or "")  # type: ignore[attr-defined]
    (retry,) = refresh(store, FAST_RETRIES, sources={"aws": source.factory()})
    assert retry.status == "updated" and _status(store, "aws").last_error is None  # type: ignore[attr-defined]


def test_missing_credentials_skip_the_source(store: PriceStore) -> None:
    def no_creds(_settings: SourceSettings) -> FakeSource:
        raise MissingCredentials("alibaba", "ALIBABA_CLOUD_ACCESS_KEY_ID is unset")

    (result,) = refresh(store, FAST_RETRIES, sources={"alibaba": no_creds})
    assert result.status == "skipped" and "ACCESS_KEY_ID" in (result.note or "")
    assert _status(store, "alibaba").last_error is None  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput, match="unknown source 'alibabba'"):
        refresh(store, FAST_RETRIES, providers=["alibabba"], sources={"alibaba": no_creds})


def test_multi_cloud_source_writes_nothing_if_one_cloud_is_bad(store: PriceStore) -> None:
    lam = _primed(store, "lambda")
    # Prices unlike the served ones (the bundled nebius rows are the catalog's own), so a partial
    # write would show.
    nebius = [o.model_copy(update={"price_hour": o.price_hour * 2}) for o in catalog_offers("nebius")]
    nebius_before = _served(store, "nebius")
    with pytest.raises(ValidationFailed, match="row_collapse"):
        store_rows(store, "skypilot", nebius + lam[:5], fetched_at=datetime.now(UTC))
    assert len(_served(store, "lambda")) == len(lam)
    assert _served(store, "nebius") == nebius_before != {o.key: o.price_hour for o in nebius}


def test_refresh_lease_admits_one_refresh_at_a_time(store: PriceStore) -> None:
    source = FakeSource("aws", catalog_offers("aws"))
    assert store.try_lease(REFRESH_LEASE, "other-replica", ttl_s=60)
    with pytest.raises(RefreshBusy, match="other-replica"):
        refresh_exclusive(store, FAST_RETRIES, sources={"aws": source.factory()})
    settings = Settings(refresh_cron="0 3 * * *")
    assert run_scheduled_refresh(settings, store, "this-replica", sources={"aws": source.factory()}) == []
    assert source.fetches == 0
    store.release_lease(REFRESH_LEASE, "other-replica")
    results = run_scheduled_refresh(settings, store, "this-replica", sources={"aws": source.factory()})
    assert [(r.provider, r.status) for r in results] == [("aws", "updated")]
    assert store.lease_holder(REFRESH_LEASE) is None  # released after the run


def test_scheduler_starts_only_with_a_cron(store: PriceStore) -> None:
    assert start_scheduler(Settings(), store) is None
    handle = start_scheduler(Settings(refresh_cron="0 3 * * *"), store)
    assert handle is not None
    try:
        (job,) = handle.get_jobs()
        assert job.next_run_time.hour == 3 and job.next_run_time.minute == 0
    finally:
        stop_scheduler(handle)
    assert not handle.running
    with pytest.raises(InvalidInput, match="GPUCOST_REFRESH_CRON"):
        parse_cron("every night")
