"""An answer's reads of the price store, each on its own connection against all on one.

    .venv/bin/python bench/store_reads.py [--runs 2000] [--pg-url postgresql+psycopg://...]

Every quote first reads which snapshots are current, the stored measurements, the calibration
learnt from bills and the quotas. On a fresh SQLite store seeded with the bundled snapshot (and on
PostgreSQL when ``--pg-url`` names a database it may fill), times those four reads made one after
the other as each reader makes them alone (a pool checkout, a BEGIN and a rollback each) and made
inside ``PriceStore.reading()`` (one of each for all four), the two taken in turn, both reading
the database (``PriceStore.steady`` bypassed); and four ``SELECT 1`` the same two ways, for what
the statements themselves cost. Then the four reads as an answer makes them now: inside
``reading()`` with ``steady`` on, which on SQLite, while nothing is committed, gives back what it
read last (one ``PRAGMA data_version`` each) and opens no connection. Then the answer cache's
version of the prices (``service.api.answer_cache.StoreVersion``): read (three reads) against
told unchanged by ``PriceStore.change_mark`` (SQLite's ``PRAGMA data_version``). On PostgreSQL
both are shown twice: read each time, as a store that does not follow its change notices reads
them (the CLI), and as a server's store answers, listening for them (``PriceStore.follow_changes``);
then how soon after another store's commit the listening store's mark moves. Prints p50 per way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from workdir import work_folder  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(label: str, url: str, runs: int) -> None:
    from pricing.store import runs as run_store
    from pricing.store.measurements import list_measurements
    from pricing.store.quotas import list_quotas
    from pricing.store.repository import open_store

    store = open_store(url)
    try:
        store.current()  # seeded

        def answer_reads() -> None:
            store.current()
            list_measurements(store)
            run_store.calibration(store)
            list_quotas(store)

        def trivial() -> None:
            for _ in range(4):
                with store._read() as conn:
                    conn.exec_driver_sql("SELECT 1").fetchall()

        def inside(fn: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                with store.reading():
                    fn()
            return run

        def from_database(fn: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                store.steady = lambda _name, read: read()  # type: ignore[method-assign]
                try:
                    fn()
                finally:
                    del store.steady
            return run

        for name, fn in (("the answer's four reads", answer_reads), ("four SELECT 1", trivial)):
            apart: list[float] = []
            shared: list[float] = []
            for i in range(runs):
                if i % 2:
                    apart.append(timed(from_database(fn)))
                    shared.append(timed(from_database(inside(fn))))
                else:
                    shared.append(timed(from_database(inside(fn))))
                    apart.append(timed(from_database(fn)))
            a, s = statistics.median(apart), statistics.median(shared)
            print(f"  {label:10} {name:24} each alone {a * 1e6:7.1f} us   in one reading() {s * 1e6:7.1f} us"
                  f"   (x{s / a:.2f})")
        as_answered(label, store, inside(answer_reads), s, runs)
        version_reads(label, store, runs)
        if store.engine.dialect.name == "postgresql":
            # What a server does (``service.api.deps``): listen for the store's change notices.
            store.follow_changes()
            assert store._notices is not None and store._notices.wait_listening(10)
            print(f"  {label}, as a server's store reads, following its change notices (PG+notices):")
            as_answered("PG+notices", store, inside(answer_reads), s, runs)
            version_reads("PG+notices", store, runs)
            notice_delay(store, url, min(runs, 200))
    finally:
        store.close()


def as_answered(label: str, store: object, answer: Callable[[], None], one_reading: float, runs: int) -> None:
    k = statistics.median(timed(answer) for _ in range(runs))
    told = store.change_mark() is not None  # type: ignore[attr-defined]
    print(f"  {label:10} {'the four, as answered':24} {k * 1e6:7.1f} us"
          + (f"   (x{k / one_reading:.3f} one reading() of the database: nothing committed, the reads kept)"
             if told else "   (cannot tell what changed: read each time)"))


def notice_delay(store: object, url: str, n: int) -> None:
    """How long after another store's commit returns this one's mark moves (its notice arrived):
    the time a replica may still serve what it kept."""
    from sqlalchemy import text

    from pricing.store.repository import open_store

    other = open_store(url)
    delays: list[float] = []
    try:
        for _ in range(n):
            mark = store.change_mark()  # type: ignore[attr-defined]
            with other.engine.begin() as conn:  # a write that changes nothing, but commits
                conn.execute(text("DELETE FROM quotas WHERE provider = 'no such provider'"))
            start = time.perf_counter()
            while store.change_mark() == mark:  # type: ignore[attr-defined]
                time.sleep(0.00005)  # lets the listener thread run, as a served process does
            delays.append(time.perf_counter() - start)
            time.sleep(0.005)
    finally:
        other.close()
    delays.sort()
    print(f"  {'PG+notices':10} {'another store commits':24} seen after p50 {statistics.median(delays) * 1e3:.3f} ms, "
          f"p95 {delays[int(0.95 * (len(delays) - 1))] * 1e3:.3f} ms, max {delays[-1] * 1e3:.3f} ms ({n} commits)")


def version_reads(label: str, store: object, runs: int) -> None:
    from service.api.answer_cache import StoreVersion

    version = StoreVersion(lambda: store)
    read: list[float] = []
    same: list[float] = []
    for i in range(runs):
        if i % 2:
            read.append(timed(version.read))
            same.append(timed(version.if_unchanged))
        else:
            same.append(timed(version.if_unchanged))
            read.append(timed(version.read))
    told = version.if_unchanged() is not None
    r, u = statistics.median(read), statistics.median(same)
    print(f"  {label:10} {'the cache version':24} read {r * 1e6:12.1f} us   told unchanged {u * 1e6:7.1f} us"
          + (f"   (x{u / r:.3f})" if told else "   (cannot tell: read each time)"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--pg-url", help="also on this PostgreSQL database (it is filled with the bundled snapshot)")
    args = ap.parse_args()
    work = work_folder("gpucost-reads-")
    os.environ.update(XDG_DATA_HOME=str(work), AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    sys.path.insert(0, str(REPO))
    print(f"p50 of {args.runs}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}:")
    compare("SQLite", f"sqlite:///{work / 'g.sqlite'}", args.runs)
    if args.pg_url:
        compare("PostgreSQL", args.pg_url, args.runs)


if __name__ == "__main__":
    main()
