"""Refreshes that go wrong: a killed process, a lost lease, garbage, hangs, throttling, shrinking
price lists; on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from optimizer.errors import InvalidInput, ProviderError
from optimizer.offer import Offer
from pricing.refresh import REFRESH_LEASE, RefreshBusy, held_lease, refresh, refresh_exclusive, store_rows
from pricing.source import RawSnapshot, SourceSettings
from pricing.store.leases import LeaseLost
from pricing.store.repository import PriceStore, open_store
from pricing.store.rows import _leases
from tests.integration._pricestore import BACKENDS, FAST_RETRIES, FakeSource, backend_url, catalog_offers, scaled

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request, tmp_path, request.param) as u:
        yield u


@pytest.fixture
def store(url: str) -> Iterator[PriceStore]:
    s = open_store(url)
    yield s
    s.close()


def _served(store: PriceStore, provider: str) -> dict[tuple[str, str, str, str], float | None]:
    return {o.key: o.price_hour for o in store.all_offers() if o.provider == provider}


def _prime(store: PriceStore, provider: str, rows: list[Offer]) -> None:
    store.replace_rows(provider, rows, fetched_at=datetime.now(UTC), source="catalog", force=True)


# The child refreshes one source that prices two providers (lambda, nebius) and stops, inside the
# write transaction, after the first provider's new list is written and made current and while
# the second one's rows go in: the worst moment to die.
CHILD = r"""
import sys, time
from datetime import UTC, datetime
from pathlib import Path
from pricing.refresh import refresh_exclusive
from pricing.store import open_store
from pricing.store.writes import Writes
from tests.integration._pricestore import FAST_RETRIES, FakeSource, catalog_offers, scaled

url, marker = sys.argv[1], Path(sys.argv[2])
store = open_store(url)
now = datetime.now(UTC)
rows = scaled(catalog_offers("lambda"), 1.25, now) + scaled(catalog_offers("nebius"), 1.25, now)
real = Writes._insert_rows
calls = []
def stalling_insert(self, conn, snapshot_id, batch):
    real(self, conn, snapshot_id, batch)
    calls.append(1)
    if len(calls) == 2:
        marker.write_text("inside the transaction")
        time.sleep(600)
Writes._insert_rows = stalling_insert
refresh_exclusive(store, FAST_RETRIES, sources={"skypilot": FakeSource("skypilot", rows).factory()}, ttl_s=3)
"""


def test_sigkill_mid_refresh_leaves_every_source_whole_and_the_next_refresh_runs(
    store: PriceStore, url: str, tmp_path: Path
) -> None:
    for provider in ("lambda", "nebius"):
        _prime(store, provider, catalog_offers(provider))
    before = {p: _served(store, p) for p in ("lambda", "nebius")}
    marker = tmp_path / "in-transaction"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, str(marker)], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 90
        while not marker.exists():
            assert child.poll() is None, "the refreshing child exited early"
            assert time.monotonic() < deadline, "the child never reached its write transaction"
            time.sleep(0.05)
        # While it runs, status shows who holds the lease, and a second refresh is refused.
        lease = store.lease_info(REFRESH_LEASE)
        assert lease is not None and lease.alive() and f":{child.pid}:" in lease.holder
        with pytest.raises(RefreshBusy):
            refresh_exclusive(store, FAST_RETRIES, sources={"skypilot": FakeSource("skypilot", []).factory()})
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    # All old: neither provider shows the half-written new prices.
    assert {p: _served(store, p) for p in ("lambda", "nebius")} == before

    now = datetime.now(UTC)
    new_rows = scaled(catalog_offers("lambda"), 1.25, now) + scaled(catalog_offers("nebius"), 1.25, now)
    killed_at = time.monotonic()
    while True:
        try:
            results = refresh_exclusive(
                store, FAST_RETRIES, sources={"skypilot": FakeSource("skypilot", new_rows).factory()}
            )
            break
        except RefreshBusy:
            assert time.monotonic() - killed_at < 60, "the dead holder's lease outlived a minute"
            time.sleep(0.25)
    assert sorted((r.provider, r.status) for r in results) == [("lambda", "updated"), ("nebius", "updated")]
    # All new.
    for provider in ("lambda", "nebius"):
        assert _served(store, provider) == {o.key: o.price_hour for o in new_rows if o.provider == provider}
    runs = store.refresh_runs()
    assert runs[0]["status"] == "updated"
    assert any(r["status"] == "aborted" and f":{child.pid}:" in r["holder"] for r in runs)
    status = {p.provider: p for p in store.status(3)}
    assert status["skypilot"].last_aborted is not None


def test_a_live_refresh_keeps_its_short_lease_by_heartbeat(store: PriceStore) -> None:
    rows = catalog_offers("lambda")
    _prime(store, "lambda", rows)

    class Slow(FakeSource):
        def fetch(self) -> RawSnapshot:
            time.sleep(2.5)  # longer than the lease's TTL below
            return super().fetch()

    results: list[object] = []
    import threading

    worker = threading.Thread(target=lambda: results.extend(refresh_exclusive(
        store, FAST_RETRIES, sources={"lambda": Slow("lambda", scaled(rows, 1.1, datetime.now(UTC))).factory()},
        ttl_s=1.0,
    )))
    worker.start()
    time.sleep(1.8)
    with pytest.raises(RefreshBusy):  # past one TTL, still held: the heartbeat renewed it
        refresh_exclusive(store, FAST_RETRIES, sources={"lambda": FakeSource("lambda", rows).factory()})
    worker.join(30)
    assert [r.status for r in results] == ["updated"]  # type: ignore[attr-defined]
    assert store.lease_info(REFRESH_LEASE) is None  # released at the end


def test_a_holder_that_lost_its_lease_writes_nothing(store: PriceStore) -> None:
    rows = catalog_offers("lambda")
    _prime(store, "lambda", rows)
    before = _served(store, "lambda")
    with held_lease(store, REFRESH_LEASE, "stalled-holder", ttl_s=30, heartbeat_s=60) as lease:
        with store._write() as conn:  # it stalls past its expiry; another replica takes over
            conn.execute(update(_leases).values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
        assert store.try_lease(REFRESH_LEASE, "successor", ttl_s=30)
        with pytest.raises(LeaseLost):
            store_rows(store, "lambda", scaled(rows, 2.0, datetime.now(UTC)), fetched_at=datetime.now(UTC),
                       fence=(lease.name, lease.holder))
    assert _served(store, "lambda") == before
    assert store.lease_holder(REFRESH_LEASE) == "successor"  # not released by the loser


def test_garbage_hangs_and_throttling(store: PriceStore) -> None:
    rows = catalog_offers("lambda")
    _prime(store, "lambda", rows)
    before = _served(store, "lambda")

    def absurd(raw: RawSnapshot) -> list[Offer]:
        return [o.model_copy(update={"price_hour": 1e9}) for o in rows]

    class Hung(FakeSource):
        def fetch(self) -> RawSnapshot:
            time.sleep(30)
            return super().fetch()

    settings = SourceSettings(extra={**FAST_RETRIES.extra, "fetch_timeout_s": 0.5})
    throttled = FakeSource("lambda", rows, faults=[ProviderError("lambda", "429 Too Many Requests", retriable=True)] * 2)
    cases = {
        "garbage": FakeSource("lambda", rows, parse_hook=absurd),
        "hang": Hung("lambda", rows),
    }
    for name, source in cases.items():
        started = time.monotonic()
        (result,) = refresh(store, settings, sources={"lambda": source.factory()})
        assert result.status == "failed", name
        assert time.monotonic() - started < 10, name
        assert _served(store, "lambda") == before, name
    (result,) = refresh(store, settings, sources={"lambda": throttled.factory()})
    assert result.status == "unchanged" and result.attempts == 3


def test_small_shrinks_cannot_walk_a_provider_down(store: PriceStore) -> None:
    rows = catalog_offers("aws")
    _prime(store, "aws", rows)
    kept = rows
    outcomes = []
    for _ in range(5):
        kept = kept[: int(len(kept) * 0.6)]  # each step keeps 60 %: above the last snapshot's half
        (result,) = refresh(store, FAST_RETRIES, sources={"aws": FakeSource("aws", kept).factory()})
        outcomes.append(result.status)
    # 100 % -> 60 % passes; 36 % of the recent peak does not, nor anything after it.
    assert outcomes == ["updated", "failed", "failed", "failed", "failed"]
    assert len(_served(store, "aws")) == int(len(rows) * 0.6)


def test_force_is_per_provider_and_never_empties(store: PriceStore) -> None:
    lam, run = catalog_offers("lambda"), catalog_offers("runpod")
    _prime(store, "lambda", lam)
    _prime(store, "runpod", run)
    sources = {
        "lambda": FakeSource("lambda", lam[: len(lam) // 4]).factory(),
        "runpod": FakeSource("runpod", run[: len(run) // 4]).factory(),
    }
    results = {r.provider: r for r in refresh(store, FAST_RETRIES, force=["lambda"], sources=sources)}
    assert results["lambda"].status == "updated" and results["runpod"].status == "failed"
    assert len(_served(store, "runpod")) == len(run)
    with pytest.raises(InvalidInput, match="force"):
        refresh(store, FAST_RETRIES, force=True, sources=sources)
    (emptied,) = refresh(store, FAST_RETRIES, force=True, sources={"lambda": FakeSource("lambda", []).factory()})
    assert emptied.status == "failed" and "'empty'" in (emptied.error or "")
    assert len(_served(store, "lambda")) == len(lam) // 4
    # After a forced shrink the guard measures against the new size, not the old peak.
    (again,) = refresh(store, FAST_RETRIES, sources={"lambda": FakeSource("lambda", lam[: len(lam) // 5]).factory()})
    assert again.status == "updated"


def test_a_multi_provider_source_is_one_transaction(store: PriceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from pricing.store.writes import Writes

    lam, neb = catalog_offers("lambda"), catalog_offers("nebius")
    _prime(store, "lambda", lam)
    _prime(store, "nebius", neb)
    before = {p: _served(store, p) for p in ("lambda", "nebius")}
    now = datetime.now(UTC)
    new = scaled(lam, 1.5, now) + scaled(neb, 1.5, now)
    real = Writes._insert_rows
    calls: list[int] = []

    def failing_second(self: Writes, conn: object, snapshot_id: int, batch: list[Offer]) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")  # after lambda's list is written and made current
        real(self, conn, snapshot_id, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(Writes, "_insert_rows", failing_second)
    with pytest.raises(OSError):
        store_rows(store, "skypilot", new, fetched_at=now)
    assert {p: _served(store, p) for p in ("lambda", "nebius")} == before
    monkeypatch.setattr(Writes, "_insert_rows", real)
    store_rows(store, "skypilot", new, fetched_at=now)
    for provider in ("lambda", "nebius"):
        assert _served(store, provider) == {o.key: o.price_hour for o in new if o.provider == provider}
