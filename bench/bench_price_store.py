"""Price store timings: import of the reference SkyPilot catalog, and ``all_offers`` cold vs memoized.

    .venv/bin/python bench/bench_price_store.py [DB_URL ...]     (default: a temporary SQLite file)

Rows: the reference SkyPilot catalog (the repository's copy, tests/data/reference/skypilot-catalog,
identical to ../shared/reference/skypilot-catalog) over the bundled snapshot, plus
the catalog's aws and runpod rows once more under a provider named ``bench-copy`` to reach
about 6,000 current rows. Prints one line per database.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from workdir import work_folder  # bench/ is on sys.path when run as a script

from pricing.adapters.skypilot_csv import load_skypilot
from pricing.refresh import store_rows
from pricing.store.repository import PriceStore, open_store

# The repository's copy, so the bench runs from a clone alone (its source and date: tests/data/reference/README.md).
CATALOG = Path(__file__).resolve().parents[1] / "tests" / "data" / "reference" / "skypilot-catalog"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench(url: str) -> None:
    store = open_store(url)
    store.ensure_seeded()
    rows = load_skypilot(CATALOG)
    t0 = time.perf_counter()
    infos = store_rows(store, "skypilot", rows, fetched_at=datetime.now(UTC))
    import_s = time.perf_counter() - t0
    extra = [o.model_copy(update={"provider": "bench-copy"}) for o in rows if o.provider in {"aws", "runpod"}]
    store.replace_rows("bench-copy", extra, fetched_at=datetime.now(UTC), source="bench copy of catalog rows")

    cold_times = []
    for _ in range(5):
        fresh = PriceStore(store.engine)  # a new process's memo is empty
        t0 = time.perf_counter()
        n = len(fresh.all_offers())
        cold_times.append(time.perf_counter() - t0)
    warm_times = []
    for _ in range(200):
        t0 = time.perf_counter()
        fresh.all_offers()
        warm_times.append(time.perf_counter() - t0)
    filt = []
    for _ in range(50):
        t0 = time.perf_counter()
        fresh.offers(gpu="A100", gpu_count=8)
        filt.append(time.perf_counter() - t0)
    counts = ", ".join(f"{i.provider}={i.row_count}" for i in infos)
    print(f"{store.engine.dialect.name}: import {len(rows)} rows in {import_s:.2f} s ({counts}); "
          f"all_offers on {n} rows: cold median {_ms(statistics.median(cold_times))}, "
          f"memoized median {_ms(statistics.median(warm_times))} (p95 {_ms(sorted(warm_times)[189])}); "
          f"offers(A100 x8) median {_ms(statistics.median(filt))}")
    store.close()


if __name__ == "__main__":
    urls = sys.argv[1:]
    if not urls:
        tmp = work_folder("gpucost-store-bench-")
        urls = [f"sqlite:///{tmp}/bench.sqlite"]
    for u in urls:
        bench(u)
