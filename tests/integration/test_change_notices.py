"""On PostgreSQL a store that follows its change notices (``PriceStore.follow_changes``, what the
server does) keeps an answer's reads while nothing is committed, as a SQLite store does, and reads
again after any write: its own at once, another process's once the notice arrives, and every time
while it cannot listen."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, event, insert, text

from optimizer.measurement import Measurement, checked
from optimizer.quotas import QuotaLimit
from pricing.store import change_notices, runs
from pricing.store.measurements import add_measurement, list_measurements, remove_measurement
from pricing.store.quotas import list_quotas, replace_quotas
from pricing.store.repository import PriceStore, open_store
from service.api.app import create_app
from service.settings import Settings
from tests.integration._pricestore import fresh_pg_database

pytestmark = pytest.mark.postgres

RECORD_FILE = Path(__file__).resolve().parents[1] / "data" / "probe" / "rtx4090_bert_base.json"
NOW = datetime(2026, 12, 1, tzinfo=UTC)
LIMITS = [QuotaLimit("aws", "us-east-1", "L-417A185B", 96.0, "AWS Service Quotas", "P instances")]
# How long a notice may take to arrive here (it takes milliseconds on loopback).
NOTICE_S = 10.0


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    with fresh_pg_database(pg_url) as url:
        yield url


def _begins(store: PriceStore) -> list[str]:
    seen: list[str] = []
    event.listen(store.engine, "begin", lambda conn: seen.append("begin"))
    return seen


def _until(what: Callable[[], bool], timeout: float = NOTICE_S) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if what():
            return True
        time.sleep(0.005)
    return False


def _settled(store: PriceStore, quiet_s: float = 0.3) -> int | None:
    """The mark once it has stayed the same for ``quiet_s`` (the notices of earlier writes are in)."""
    end = time.monotonic() + NOTICE_S
    mark = store.change_mark()
    while time.monotonic() < end:
        time.sleep(quiet_s)
        now = store.change_mark()
        if now == mark and now is not None:
            return now
        mark = now
    raise AssertionError("the change mark did not settle")


def _moved(store: PriceStore, before: int | None) -> bool:
    return _until(lambda: store.change_mark() not in (None, before))


@contextmanager
def _following(url: str) -> Iterator[tuple[PriceStore, PriceStore]]:
    """A store that follows its change notices, listening, and another on the same database."""
    store, other = open_store(url), open_store(url)
    try:
        store.current()  # seeds the database (a commit)
        assert store.change_mark() is None  # not following yet: PostgreSQL cannot tell
        assert store.follow_changes()
        assert store._notices is not None and store._notices.wait_listening(NOTICE_S)
        yield store, other
    finally:
        store.close()
        other.close()


def test_every_table_of_the_store_notifies_its_writes(pg_db: str) -> None:
    """Revision 0007 puts the trigger on every table: a table added later without it would let a
    server keep reads that a write to it changed."""
    store = open_store(pg_db)
    try:
        with store.engine.connect() as conn:
            tables = set(conn.exec_driver_sql(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").scalars())
            notifying = set(conn.execute(text(
                "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE t.tgname = :name AND n.nspname = current_schema()"), {"name": change_notices.TRIGGER}).scalars())
        assert {"offers", "snapshots", "quotas", "measurements", "planned_runs"} <= tables
        assert notifying == tables
    finally:
        store.close()


def test_kept_reads_follow_every_commit_on_postgresql(pg_db: str) -> None:
    with _following(pg_db) as (store, other):
        first = store.current().snapshot_id()
        assert list_quotas(store) == [] and list_measurements(store) == [] and runs.calibration(store) == []
        begins = _begins(store)
        assert list_quotas(store) == [] and list_measurements(store) == [] and runs.calibration(store) == []
        assert store.current().snapshot_id() == first
        assert begins == []  # nothing committed since: nothing read again

        # Another process's writes: read again once their notice arrives.
        mark = store.change_mark()
        replace_quotas(other, "aws", LIMITS, NOW)
        assert _moved(store, mark)
        assert list_quotas(store) == LIMITS
        mark = store.change_mark()
        m = checked(Measurement.model_validate(json.loads(RECORD_FILE.read_text(encoding="utf-8"))))
        stored, _ = add_measurement(other, m)
        assert _moved(store, mark)
        assert list_measurements(store) == [stored]
        mark = store.change_mark()
        with runs._write(other) as conn:
            conn.execute(insert(runs._calib).values(provider="aws", gpu="A100", hours_factor=1.25,
                                                    rate_factor=0.9, runs=["run-1"], updated_at=NOW))
        assert _moved(store, mark)
        assert runs.calibration(store)[0].hours_factor == 1.25
        mark = store.change_mark()
        lam = [o for o in other.all_offers() if o.provider == "lambda" and o.price_hour]
        other.replace_rows("lambda", [o.model_copy(update={"price_hour": o.price_hour * 1.01}) for o in lam],
                           fetched_at=NOW, source="test")
        assert _moved(store, mark)
        assert store.current().snapshot_id() != first

        # The store's own write is read by the very next call, without waiting for its notice.
        assert list_measurements(store) == [stored]
        remove_measurement(store, stored.id or "")
        assert list_measurements(store) == []
        # A rolled-back write sends no notice; reads stay kept once the last notices are in.
        _settled(store)
        assert list_quotas(store) == LIMITS
        mark = store.change_mark()
        with pytest.raises(RuntimeError, match="rolled back"), other.engine.begin() as conn:
            conn.execute(text("DELETE FROM quotas"))
            raise RuntimeError("rolled back")
        time.sleep(0.3)
        assert store.change_mark() == mark
        assert list_quotas(store) == LIMITS


def test_the_stores_own_writes_move_the_mark_without_their_notice(pg_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listening on a channel nobody notifies: only the store's own commits move its mark, at
    once, and a write rolled back does not; another process's write stays unseen (its notice is
    what tells of it)."""
    monkeypatch.setattr(change_notices, "CHANNEL", "gpucost_test_silence")
    with _following(pg_db) as (store, other):
        assert list_quotas(store) == []
        mark = store.change_mark()
        replace_quotas(store, "aws", LIMITS, NOW)
        assert store.change_mark() != mark
        assert list_quotas(store) == LIMITS
        mark = store.change_mark()
        with pytest.raises(RuntimeError, match="rolled back"), store.engine.begin() as conn:
            conn.execute(text("DELETE FROM quotas"))
            raise RuntimeError("rolled back")
        assert store.change_mark() == mark
        begins = _begins(store)
        assert list_quotas(store) == LIMITS and begins == []
        replace_quotas(other, "aws", [], NOW)
        time.sleep(0.3)
        assert store.change_mark() == mark and list_quotas(store) == LIMITS


def test_notices_that_do_not_arrive_mean_reading_every_time(pg_db: str, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A connection that takes ``LISTEN`` but delivers nothing (a pooler in transaction mode): the
    listener's heartbeats never come back, so nothing is ever kept, and the log says why."""
    monkeypatch.setattr(change_notices, "_BEAT", "SELECT '{}'")  # sent, but no notice comes of it
    monkeypatch.setattr(change_notices, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(change_notices, "STALE_S", 0.5)
    store = open_store(pg_db)
    try:
        store.current()
        with caplog.at_level("WARNING", logger="pricing.store.change_notices"):
            assert store.follow_changes()
            assert store._notices is not None and not store._notices.wait_listening(1.5)
            assert _until(lambda: "change notices do not arrive" in caplog.text, 5.0)
        begins = _begins(store)
        assert list_quotas(store) == [] and list_quotas(store) == [] and begins == ["begin", "begin"]
    finally:
        store.close()


def _listener_pids(url: str) -> list[int]:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'gpucost change notices' "
                "AND datname = current_database()")).scalars())
    finally:
        engine.dispose()


def test_a_lost_listener_means_reading_every_time_until_it_is_back(pg_db: str) -> None:
    with _following(pg_db) as (store, other):
        assert list_quotas(store) == []
        before = store.change_mark()
        (pid,) = _listener_pids(pg_db)
        admin = create_engine(pg_db, isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        finally:
            admin.dispose()
        # While it is down nothing is kept: a write then is read though no notice was heard.
        assert _until(lambda: store.change_mark() is None)
        replace_quotas(other, "aws", LIMITS, NOW)
        begins = _begins(store)
        assert list_quotas(store) == LIMITS and begins == ["begin"]
        # Back, under a mark of its own: what was kept before the loss is not given again.
        assert store._notices is not None and store._notices.wait_listening(NOTICE_S)
        assert _settled(store) != before
        assert list_quotas(store) == LIMITS
        begins.clear()
        assert list_quotas(store) == LIMITS and begins == []


def test_closing_the_store_stops_listening(pg_db: str) -> None:
    with _following(pg_db) as (store, _):
        notices = store._notices
        assert notices is not None and notices.alive and len(_listener_pids(pg_db)) == 1
    assert not notices.alive
    assert _until(lambda: _listener_pids(pg_db) == [])
    assert store.change_mark() is None  # a closed store reads (and fails) like any other


QUOTE = {"workload": {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e7, "seq_len": 512},
         "constraints": {"gpus": ["A100"], "max_gpus": 8, "providers": ["aws"], "include_local": False}}


def test_the_server_keeps_its_reads_on_postgresql_until_a_write(pg_db: str) -> None:
    """``POST /v1/quote`` on a PostgreSQL store: a new question begins no transaction while
    nothing was committed, and a quota written by another process is in the next answer."""
    other = open_store(pg_db)
    try:
        with TestClient(create_app(Settings(db_url=pg_db, answer_cache=False))) as c:
            assert c.post("/v1/quote", json=QUOTE).status_code == 200  # opens, seeds, listens
            store = c.app.state.store  # type: ignore[attr-defined]
            assert store._notices is not None and store._notices.wait_listening(NOTICE_S)
            _settled(store)  # the seeding's own notice is in
            c.post("/v1/quote", json=QUOTE)  # reads once under the settled mark
            begins = _begins(store)
            body = {**QUOTE, "workload": {**QUOTE["workload"], "tokens": 3e7}}  # a new question
            first = c.post("/v1/quote", json=body)
            assert first.status_code == 200 and begins == []
            assert first.json()["best"]["quota"] != "short"

            mark = store.change_mark()
            # No A100 instance in any AWS region: the P4/P5 on-demand quotas at 0 vCPUs.
            limits = [QuotaLimit("aws", region, "L-417A185B", 0.0, "AWS Service Quotas", "P instances")
                      for region in {o.region for o in other.all_offers() if o.provider == "aws"}]
            replace_quotas(other, "aws", limits, NOW)
            assert _moved(store, mark)
            after = c.post("/v1/quote", json={**body, "workload": {**body["workload"], "tokens": 4e7}})
            assert begins == ["begin"]
            assert after.status_code == 200
            best = after.json()["best"]
            assert best["provider"] == "aws" and best["quota"] == "short"
            assert best["quota_detail"]["code"] == "L-417A185B" and best["quota_detail"]["limit"] == 0.0
    finally:
        other.close()
