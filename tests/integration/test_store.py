"""The price store on SQLite and on a real PostgreSQL: the same tests, the same code."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select, text

from optimizer.errors import InvalidInput, StoreError
from optimizer.offer import Offer
from pricing.snapshot.loader import load_bundled
from pricing.store.peek import script_head
from pricing.store.repository import PriceStore, content_hash, open_store
from pricing.store.schema import Base, SnapshotRow
from pricing.validate import ValidationFailed
from tests.integration._pricestore import BACKENDS, backend_url, catalog_offers, days_ago, scaled


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request, tmp_path, request.param) as url:
        yield url


@pytest.fixture
def store(db_url: str) -> Iterator[PriceStore]:
    s = open_store(db_url)
    yield s
    s.close()


def _snapshot_count(store: PriceStore, provider: str | None = None) -> int:
    stmt = select(func.count()).select_from(SnapshotRow)
    if provider:
        stmt = stmt.where(SnapshotRow.provider == provider)
    with store.engine.connect() as conn:
        return int(conn.execute(stmt).scalar_one())


def _by_key(offers: list[Offer]) -> dict[tuple[str, str, str, str], dict[str, object]]:
    return {o.key: o.model_dump() for o in offers}


def test_new_store_is_migrated_and_seeded_from_the_bundle(store: PriceStore) -> None:
    with store.engine.connect() as conn:
        # One chain of migrations, and a new store is at its head.
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == script_head()
    bundled = load_bundled()
    assert _by_key(store.all_offers()) == _by_key(bundled.offers)
    assert [b.id for b in store.local_builds()] == sorted(b.id for b in bundled.builds)
    assert store.local_builds() == sorted(bundled.builds, key=lambda b: b.id)
    assert store.prices_as_of() == bundled.as_of
    status = {p.provider: p for p in store.status(stale_after_days=3)}
    assert status["aws"].rows == sum(o.provider == "aws" for o in bundled.offers)


def test_schema_module_and_migration_agree(store: PriceStore) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []
    assert {"snapshots", "offers", "local_builds", "provider_status", "leases", "store_meta"} <= set(
        inspect(store.engine).get_table_names()
    )


def test_seeding_happens_once_even_when_opened_concurrently(db_url: str) -> None:
    stores: list[PriceStore] = []
    errors: list[BaseException] = []

    def open_and_read() -> None:
        try:
            s = open_store(db_url)
            stores.append(s)
            s.all_offers()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    bundled = load_bundled()
    providers = {o.provider for o in bundled.offers} | {"local"}
    assert _snapshot_count(stores[0]) == len(providers)
    assert len(stores[0].all_offers()) == len(bundled.offers)
    for s in stores:
        s.close()


def test_round_trip_keeps_every_field(store: PriceStore) -> None:
    rows = catalog_offers("aws")
    fetched = datetime.now(UTC)
    info = store.replace_rows("aws", rows, fetched_at=fetched, source="skypilot-catalog:aws/vms.csv")
    assert info.changed and info.row_count == len(rows)
    served = [o for o in store.all_offers() if o.provider == "aws"]
    assert _by_key(served) == _by_key(rows)
    assert all(o.as_of.tzinfo is not None for o in served)
    assert store.prices_as_of()["aws"] == min(o.as_of for o in rows)


def test_identical_reingest_is_idempotent(store: PriceStore) -> None:
    rows = catalog_offers("lambda")
    first = store.replace_rows("lambda", rows, fetched_at=datetime.now(UTC), source="catalog")
    count = _snapshot_count(store, "lambda")
    again = store.replace_rows("lambda", list(reversed(rows)), fetched_at=datetime.now(UTC), source="catalog")
    assert not again.changed
    assert again.id == first.id and again.content_hash == first.content_hash == content_hash(rows)
    assert _snapshot_count(store, "lambda") == count
    assert len([o for o in store.all_offers() if o.provider == "lambda"]) == len(rows)


def test_one_answer_reads_one_set_of_snapshots_even_across_a_refresh(store: PriceStore) -> None:
    rows = catalog_offers("lambda")
    store.replace_rows("lambda", rows, fetched_at=datetime.now(UTC), source="catalog")
    current = store.current()
    before = (current.snapshot_id(), current.prices_as_of(), _by_key(current.all_offers()))
    dearer = [o.model_copy(update={"price_hour": (o.price_hour or 1.0) * 2}) for o in rows]
    store.replace_rows("lambda", dearer, fetched_at=datetime.now(UTC), source="catalog, later")
    assert (current.snapshot_id(), current.prices_as_of(), _by_key(current.all_offers())) == before
    assert store.snapshot_id() != before[0]  # the next answer reads the new prices
    assert _by_key([o for o in store.all_offers() if o.provider == "lambda"]) == _by_key(dearer)


def test_a_crash_inside_the_swap_leaves_the_old_prices(
    store: PriceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = catalog_offers("aws")
    store.replace_rows("aws", old, fetched_at=datetime.now(UTC), source="v1")
    before = store.all_offers()

    def crash(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("power cut between writing rows and the flip")

    monkeypatch.setattr(store, "_flip_current", crash)
    with pytest.raises(RuntimeError):
        store.replace_rows("aws", scaled(old, 0.9, datetime.now(UTC)), fetched_at=datetime.now(UTC), source="v2")
    monkeypatch.undo()
    assert store.all_offers() == before
    with store.engine.connect() as conn:
        orphans = conn.execute(select(func.count()).select_from(SnapshotRow).where(SnapshotRow.source == "v2"))
        assert orphans.scalar_one() == 0  # the half-written snapshot was rolled back with its rows


def test_readers_see_old_or_new_never_a_mix(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = open_store(db_url)
    reader = open_store(db_url)
    old = catalog_offers("aws")
    new = scaled(old, 0.8, datetime.now(UTC))
    writer.replace_rows("aws", old, fetched_at=datetime.now(UTC), source="v1")
    rows_written = threading.Event()
    may_flip = threading.Event()
    original_flip = writer._flip_current

    def slow_flip(conn: object, provider: str, snapshot_id: int) -> None:
        rows_written.set()
        assert may_flip.wait(10)
        original_flip(conn, provider, snapshot_id)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_flip_current", slow_flip)
    t = threading.Thread(target=writer.replace_rows, args=("aws", new),
                         kwargs={"fetched_at": datetime.now(UTC), "source": "v2"})
    t.start()
    try:
        assert rows_written.wait(10)
        mid = [o for o in reader.all_offers() if o.provider == "aws"]
        assert _by_key(mid) == _by_key(old)
    finally:
        may_flip.set()
        t.join(10)
    after = [o for o in reader.all_offers() if o.provider == "aws"]
    assert _by_key(after) == _by_key(new)
    writer.close()
    reader.close()


def test_memo_is_reused_and_invalidated_by_another_process(db_url: str) -> None:
    a = open_store(db_url)
    b = open_store(db_url)  # stands in for another replica on the same database
    first = a.all_offers()
    second = a.all_offers()
    assert first == second and first is not second
    assert all(x is y for x, y in zip(first, second, strict=True))  # served from the memo
    b.replace_rows("lambda", catalog_offers("lambda"), fetched_at=datetime.now(UTC), source="catalog")
    third = a.all_offers()
    assert len([o for o in third if o.provider == "lambda"]) == len(catalog_offers("lambda"))
    assert a.snapshot_id() == b.snapshot_id() != ""
    a.close()
    b.close()


def test_offers_filter_and_rank(store: PriceStore) -> None:
    aws = catalog_offers("aws")
    store.replace_rows("aws", aws, fetched_at=datetime.now(UTC), source="catalog")
    a100x8 = store.offers(gpu="nvidia a100", gpu_count=8, providers=["AWS"])
    assert a100x8 and all(o.gpu == "A100" and o.gpu_count == 8 for o in a100x8)
    prices = [o.price_hour for o in a100x8]
    assert prices == sorted(prices)
    assert prices[0] == min(o.price_hour for o in aws if o.gpu == "A100" and o.gpu_count == 8 and o.price_hour)

    spot = store.offers(gpu="A100", providers=["aws"], spot=True)
    assert spot and all(o.spot_price_hour is not None for o in spot)
    assert [o.spot_price_hour for o in spot] == sorted(o.spot_price_hour for o in spot)  # type: ignore[type-var]

    cheap = store.offers(providers=["aws"], regions=["us-east-1"], max_hourly=1.0, limit=3)
    assert 0 < len(cheap) <= 3
    assert all(o.region == "us-east-1" and o.price_hour is not None and o.price_hour <= 1.0 for o in cheap)
    with pytest.raises(InvalidInput, match="did you mean"):
        store.offers(gpu="A1000")


def test_history_keeps_every_version(store: PriceStore) -> None:
    v1 = catalog_offers("aws", as_of=days_ago(2))
    v2 = scaled(v1, 0.9, days_ago(1))  # a 10 % cut, derived from the real rows
    first = store.replace_rows("aws", v1, fetched_at=days_ago(2), source="v1")
    second = store.replace_rows("aws", v2, fetched_at=days_ago(1), source="v2")
    store.replace_rows("aws", v2, fetched_at=datetime.now(UTC), source="v2 again")  # unchanged: no point
    every = store.history("p4d.24xlarge", region="us-east-1")
    # The bundled snapshot the store was seeded with has its own points; keep ours.
    points = [p for p in every if p["snapshot_id"] in (first.id, second.id)]
    assert len(every) > len(points)
    want_v1 = sorted(o.price_hour for o in v1 if o.instance_type == "p4d.24xlarge" and o.region == "us-east-1")
    assert want_v1, "the reference catalog prices p4d.24xlarge in us-east-1"
    assert [p["is_current"] for p in points] == [False] * len(want_v1) + [True] * len(want_v1)
    assert sorted(p["price_hour"] for p in points[: len(want_v1)]) == want_v1
    assert sorted(p["price_hour"] for p in points[len(want_v1):]) == pytest.approx([x * 0.9 for x in want_v1])
    assert points[0]["fetched_at"] < points[-1]["fetched_at"]
    with pytest.raises(InvalidInput, match="did you mean 'p4d.24xlarge'"):
        store.history("p4d.24xlarg")


def test_status_staleness_comes_from_as_of(store: PriceStore) -> None:
    store.replace_rows("lambda", catalog_offers("lambda", as_of=days_ago(10)), fetched_at=datetime.now(UTC),
                       source="catalog")
    store.replace_rows("nebius", catalog_offers("nebius", as_of=days_ago(1)), fetched_at=days_ago(30),
                       source="catalog")
    status = {p.provider: p for p in store.status(stale_after_days=3)}
    assert status["lambda"].stale and status["lambda"].age_hours == pytest.approx(240, abs=0.1)
    # Fetched a month ago but priced yesterday: fresh, because only as_of counts.
    assert not status["nebius"].stale
    assert not {p.provider: p for p in store.status(stale_after_days=30)}["lambda"].stale

    store.record_attempt("lambda", "ProviderError: lambda: HTTP 503")
    flagged = {p.provider: p for p in store.status(3)}["lambda"]
    assert flagged.last_error == "ProviderError: lambda: HTTP 503" and flagged.rows == len(catalog_offers("lambda"))
    store.record_attempt("lambda", None)
    cleared = {p.provider: p for p in store.status(3)}["lambda"]
    assert cleared.last_error is None and cleared.last_attempt is not None


def test_validation_rules_reject_and_keep_the_last_good_rows(store: PriceStore) -> None:
    good = catalog_offers("runpod")
    store.replace_rows("runpod", good, fetched_at=datetime.now(UTC), source="catalog")
    now = datetime.now(UTC)

    def rule_of(rows: list[Offer], provider: str = "runpod") -> str:
        with pytest.raises(ValidationFailed) as err:
            store.replace_rows(provider, rows, fetched_at=now, source="bad")
        assert err.value.rule in str(err.value)
        return err.value.rule

    assert rule_of(good[: len(good) // 3]) == "row_collapse"
    assert rule_of([]) == "empty"
    assert rule_of(good + good[:1]) == "duplicate_keys"
    assert rule_of(scaled(good, 730, now)) == "price_bounds"  # monthly figures read as hourly
    assert rule_of([good[0].model_copy(update={"gpu": "nvidia a100"})] + good[1:]) == "schema"
    assert rule_of(good, provider="vast") == "schema"  # rows of another provider
    zero = Offer.model_construct(**{**good[0].model_dump(), "price_hour": 0.0})
    assert rule_of([zero] + good[1:]) == "price_positive"
    no_price = Offer.model_construct(**{**good[0].model_dump(), "price_hour": None, "spot_price_hour": None})
    assert rule_of([no_price] + good[1:]) == "price_positive"
    future = good[0].model_copy(update={"as_of": now + timedelta(days=5)})
    assert rule_of([future] + good[1:]) == "schema"

    served = [o for o in store.all_offers() if o.provider == "runpod"]
    assert _by_key(served) == _by_key(good)

    shrunk = store.replace_rows("runpod", good[:10], fetched_at=now, source="deliberate", force=True)
    assert shrunk.changed and shrunk.previous_rows == len(good)
    assert len([o for o in store.all_offers() if o.provider == "runpod"]) == 10


def test_local_builds_and_unknown_build(store: PriceStore) -> None:
    builds = store.local_builds()
    assert builds and store.local_build(builds[0].id) == builds[0]
    assert all(b.parts for b in builds)  # the bill of materials survives the JSON column
    with pytest.raises(InvalidInput) as err:
        store.local_build(builds[0].id + "x")
    assert err.value.field == "buy.build" and "did you mean" in err.value.reason


def test_lease_is_exclusive_between_two_holders(db_url: str) -> None:
    a = open_store(db_url)
    b = open_store(db_url)  # a second replica
    assert a.try_lease("refresh", "replica-a", ttl_s=60)
    assert not b.try_lease("refresh", "replica-b", ttl_s=60)
    assert b.lease_holder("refresh") == "replica-a"
    assert a.try_lease("refresh", "replica-a", ttl_s=60)  # renewal by the holder
    b.release_lease("refresh", "replica-b")  # not b's to release: no effect
    assert not b.try_lease("refresh", "replica-b", ttl_s=60)
    a.release_lease("refresh", "replica-a")
    assert b.try_lease("refresh", "replica-b", ttl_s=0.001)
    threading.Event().wait(0.01)
    assert a.try_lease("refresh", "replica-a", ttl_s=60)  # b's lease expired

    winners: list[str] = []
    contenders = [open_store(db_url) for _ in range(4)]

    def contend(i: int) -> None:
        if contenders[i].try_lease("race", f"holder-{i}", ttl_s=60):
            winners.append(f"holder-{i}")

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1 and a.lease_holder("race") == winners[0]
    for s in (a, b, *contenders):
        s.close()


def test_unreachable_database_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError):
        open_store(f"sqlite:///{tmp_path / 'missing-dir' / 'x.sqlite'}")


def test_default_store_is_sqlite_in_the_user_data_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    store = open_store(None)
    assert store.engine.dialect.name == "sqlite"
    assert (tmp_path / "data" / "gpucost" / "prices.sqlite").is_file()
    assert store.all_offers()
    store.close()


def test_change_mark_moves_with_every_commit_to_a_sqlite_file_and_only_then(db_url: str) -> None:
    """``PriceStore.change_mark``: the same number while nothing is committed, a new one after a
    write from another connection to the file (another process or replica) or from the store
    itself; None where it cannot be told cheaply (PostgreSQL, an in-memory SQLite store)."""
    store, other = open_store(db_url), open_store(db_url)
    try:
        store.ensure_seeded()
        first = store.change_mark()
        if db_url.startswith("postgresql"):
            assert first is None
            return
        assert first is not None
        store.all_offers()  # reads commit nothing
        assert store.change_mark() == first
        lam = [o for o in other.all_offers() if o.provider == "lambda"]
        other.replace_rows("lambda", scaled(lam, 0.9, datetime.now(UTC)), fetched_at=datetime.now(UTC), source="another writer")
        second = store.change_mark()
        assert second is not None and second != first
        store.replace_rows("lambda", lam, fetched_at=datetime.now(UTC), source="this store")
        assert store.change_mark() not in (None, second)
    finally:
        store.close()
        other.close()
    memory = open_store("sqlite://")
    try:
        assert memory.change_mark() is None
    finally:
        memory.close()
