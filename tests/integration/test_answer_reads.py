"""The reads every answer makes (measurements, quotas, learnt calibration, the versions the answer
cache keys on) are plain SQL shared with the sqlite3 quick path: on SQLite and on PostgreSQL they
give back what the store's own writers stored, values decoded from JSON where the column holds it,
and the SQLite file read with sqlite3 alone gives the same. A quote makes them in one transaction
(``PriceStore.reading``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import event, insert
from sqlalchemy.engine import make_url

from optimizer.errors import StoreError
from optimizer.measurement import Measurement, checked
from optimizer.quotas import QuotaLimit
from pricing.store import runs
from pricing.store.calibration_peek import calibration_from_file
from pricing.store.measurement_peek import read_sqlite as measurements_from_file
from pricing.store.measurements import (
    add_measurement,
    list_measurements,
    measurements_version,
    remove_measurement,
)
from pricing.store.quotas import list_quotas, replace_quotas
from pricing.store.quotas import read_sqlite as quotas_from_file
from pricing.store.repository import open_store
from service.answers import quote_answer
from service.bills import quote_calibration
from service.schemas import QuoteRequest
from tests.integration._pricestore import BACKENDS, backend_url

RECORD_FILE = Path(__file__).resolve().parents[1] / "data" / "probe" / "rtx4090_bert_base.json"
NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_answer_reads_give_back_what_was_stored(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> None:
    with backend_url(request, tmp_path, backend) as url:
        store = open_store(url)
        try:
            # Nothing stored yet: empty lists and the versions' first values.
            assert list_measurements(store) == [] and list_quotas(store) == [] and runs.calibration(store) == []
            assert measurements_version(store) == "0" and runs.version(store) == ""

            m = checked(Measurement.model_validate(json.loads(RECORD_FILE.read_text(encoding="utf-8"))))
            stored, new = add_measurement(store, m)
            assert new
            first = measurements_version(store)
            assert first != "0"
            limits = [QuotaLimit("aws", "us-east-1", "L-417A185B", 96.0, "AWS Service Quotas", "P instances"),
                      QuotaLimit("aws", "global", "L-7212CCBC", 64.0, "AWS Service Quotas", None)]
            assert replace_quotas(store, "aws", limits, NOW) == 2
            with runs._write(store) as conn:  # what a bill import's relearning writes
                conn.execute(insert(runs._calib).values(provider="aws", gpu="A100", hours_factor=1.25,
                                                        rate_factor=0.9, runs=["run-1", "run-2"], updated_at=NOW))

            assert list_measurements(store) == [stored]
            assert sorted(list_quotas(store), key=lambda q: q.region) == sorted(limits, key=lambda q: q.region)
            (factor,) = runs.calibration(store)
            assert (factor.provider, factor.gpu, factor.hours_factor, factor.rate_factor, factor.runs) == (
                "aws", "A100", 1.25, 0.9, ["run-1", "run-2"])

            if backend == "sqlite":  # the CLI's quick path reads the same rows without SQLAlchemy
                db = Path(make_url(url).database or "")
                assert measurements_from_file(db) == [stored]
                assert quotas_from_file(db) == list_quotas(store)
                assert calibration_from_file(db) == runs.calibration(store)

            assert remove_measurement(store, stored.id or "")
            assert list_measurements(store) == [] and measurements_version(store) not in ("0", first)
        finally:
            store.engine.dispose()


def _begins(store: object) -> list[str]:
    """Every transaction the store's engine begins from now on (reads and writes)."""
    seen: list[str] = []
    event.listen(store.engine, "begin", lambda conn: seen.append("begin"))  # type: ignore[attr-defined]
    return seen


QUOTE = {"workload": {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 2e7, "seq_len": 512},
         "constraints": {"gpus": ["A100"], "max_gpus": 8, "providers": ["aws", "gcp"], "include_local": False}}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quotes_reads_share_one_transaction(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> None:
    """``quote_answer`` reads which snapshots are current, the measurements, calibration and
    quotas inside ``PriceStore.reading``: one transaction for all of them, and the same answer."""
    with backend_url(request, tmp_path, backend) as url:
        store = open_store(url)
        try:
            req = QuoteRequest.model_validate(QUOTE)
            first = quote_answer(req, store)  # seeds the store and prepares the offers
            begins = _begins(store)
            again = quote_answer(req, store)
            # SQLite tells that nothing was committed since (``PriceStore.steady``): the reads are
            # kept and no transaction begins. PostgreSQL cannot tell: one transaction.
            assert begins == ([] if backend == "sqlite" else ["begin"])
            assert again.model_dump(exclude={"solver"}) == first.model_dump(exclude={"solver"})
            # After a commit every read goes to the database again, all in one transaction.
            limits = [QuotaLimit("azure", "eastus", "standardNDSFamily", 24.0, "Azure quotas", None)]
            replace_quotas(store, "azure", limits, NOW)
            begins.clear()
            third = quote_answer(req, store)
            assert begins == ["begin"]
            assert third.model_dump(exclude={"solver"}) == first.model_dump(exclude={"solver"})
            # Outside ``reading`` each of those reads begins its own transaction.
            replace_quotas(store, "azure", limits, NOW)
            begins.clear()
            quote_calibration(req, store), list_quotas(store), list_measurements(store), store.current()
            assert len(begins) == 4
        finally:
            store.engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_read_inside_reading_leaves_the_others_working(request: pytest.FixtureRequest, tmp_path: Path,
                                                                backend: str) -> None:
    """PostgreSQL refuses every statement of a transaction after a failed one: the reads after a
    failure open their own connections, as they would outside ``reading``."""
    with backend_url(request, tmp_path, backend) as url:
        store = open_store(url)
        try:
            with store.reading():
                with pytest.raises(StoreError, match="price store read failed"), store._read() as conn:
                    conn.exec_driver_sql("SELECT no_such_column FROM no_such_table")
                assert store.current().snapshot_id()
                assert list_quotas(store) == []
        finally:
            store.engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_inside_reading_is_refused(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> None:
    with backend_url(request, tmp_path, backend) as url:
        store = open_store(url)
        try:
            limits = [QuotaLimit("aws", "us-east-1", "L-417A185B", 96.0, "AWS Service Quotas", "P instances")]
            with store.reading(), pytest.raises(RuntimeError, match="inside PriceStore.reading"):
                replace_quotas(store, "aws", limits, NOW)
            assert replace_quotas(store, "aws", limits, NOW) == 1  # after it, writes go through
            with store.reading():
                assert list_quotas(store) == limits
        finally:
            store.engine.dispose()


def test_kept_reads_follow_every_commit_to_the_file(tmp_path: Path) -> None:
    """``PriceStore.steady`` keeps the answer's reads on SQLite only while nothing is committed:
    a write by another store on the same file (another process, a refresh worker) is read by the
    very next call, and a write of the store's own likewise."""
    url = f"sqlite:///{tmp_path / 'kept.sqlite'}"
    store, other = open_store(url), open_store(url)
    try:
        first = store.current().snapshot_id()  # seeds the store (a commit)
        assert list_quotas(store) == [] and list_measurements(store) == [] and runs.calibration(store) == []
        begins = _begins(store)
        assert list_quotas(store) == [] and list_measurements(store) == [] and runs.calibration(store) == []
        assert store.current().snapshot_id() == first
        assert begins == []  # nothing committed: nothing read again

        limits = [QuotaLimit("aws", "us-east-1", "L-417A185B", 96.0, "AWS Service Quotas", "P instances")]
        replace_quotas(other, "aws", limits, NOW)
        assert list_quotas(store) == limits
        m = checked(Measurement.model_validate(json.loads(RECORD_FILE.read_text(encoding="utf-8"))))
        stored, _ = add_measurement(other, m)
        assert list_measurements(store) == [stored]
        with runs._write(other) as conn:
            conn.execute(insert(runs._calib).values(provider="aws", gpu="A100", hours_factor=1.25,
                                                    rate_factor=0.9, runs=["run-1"], updated_at=NOW))
        (factor,) = runs.calibration(store)
        assert factor.hours_factor == 1.25
        # A caller changing its factors does not change what the next caller gets.
        factor.hours_factor = 9.0
        assert runs.calibration(store)[0].hours_factor == 1.25
        # A refresh: the current snapshots change.
        lam = [o for o in other.all_offers() if o.provider == "lambda" and o.price_hour]
        other.replace_rows("lambda", [o.model_copy(update={"price_hour": o.price_hour * 1.01}) for o in lam],
                           fetched_at=NOW, source="test")
        assert store.current().snapshot_id() != first

        remove_measurement(store, stored.id or "")  # the store's own write
        assert list_measurements(store) == []
    finally:
        store.close()
        other.close()


def test_an_answers_reads_take_the_change_mark_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside ``PriceStore.reading`` the first ``steady`` read takes the change mark and the others
    use it: a quote asks SQLite for it once, not four times. A commit landing meanwhile is read by
    the next answer."""
    url = f"sqlite:///{tmp_path / 'mark.sqlite'}"
    store, other = open_store(url), open_store(url)
    try:
        req = QuoteRequest.model_validate(QUOTE)
        quote_answer(req, store)  # seeds the store and keeps its reads
        taken: list[int | None] = []
        real = type(store).change_mark

        def counted(self: object) -> int | None:
            taken.append(real(self))  # type: ignore[arg-type]
            return taken[-1]

        monkeypatch.setattr(type(store), "change_mark", counted)
        quote_answer(req, store)
        assert len(taken) == 1
        limits = [QuotaLimit("aws", "us-east-1", "L-417A185B", 96.0, "AWS Service Quotas", "P instances")]
        with store.reading():
            assert list_quotas(store) == []
            replace_quotas(other, "aws", limits, NOW)  # another process commits meanwhile
            assert list_quotas(store) == [] and list_measurements(store) == []  # as of the first mark
        assert len(taken) == 2
        assert list_quotas(store) == limits  # the next read, outside: a new mark
        assert len(taken) == 3 and taken[2] != taken[1]
    finally:
        store.close()
        other.close()
