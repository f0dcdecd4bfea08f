"""Bundled snapshot: size on disk, load time, and a fresh store's first read.

    .venv/bin/python bench/bench_snapshot_load.py

Baseline in the same run: decompressing and splitting the catalog CSV alone (the I/O floor), so
the ratio says what building validated ``Offer`` rows costs on top of reading the bytes.
"""

from __future__ import annotations

import csv
import gzip
import io
import statistics
import tempfile
import time
from collections import Counter
from importlib import resources
from pathlib import Path


def _best_of(fn, n: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    from pricing.snapshot import loader
    from pricing.store.repository import open_store

    data = resources.files("pricing.snapshot").joinpath("data")
    files = [f for f in data.iterdir() if f.is_file()] + list(data.joinpath("autodl").iterdir())
    size = sum(len(f.read_bytes()) for f in files)
    raw = data.joinpath(loader.CATALOG_FILE).read_bytes()
    print(f"bundle: {len(files)} files, {size / 1024:.1f} KiB on disk; "
          f"{loader.CATALOG_FILE} {len(raw) / 1024:.1f} KiB ({len(gzip.decompress(raw)) / 1024:.0f} KiB unpacked)")

    def baseline() -> None:
        list(csv.DictReader(io.StringIO(gzip.decompress(raw).decode())))

    def load() -> None:
        loader.load_bundled.cache_clear()
        loader.load_bundled()

    base, full = _best_of(baseline), _best_of(load)
    snap = loader.load_bundled()
    counts = Counter(o.provider for o in snap.offers)
    print(f"load_bundled: {full * 1000:.0f} ms for {len(snap.offers)} offers + {len(snap.builds)} builds; "
          f"read+split baseline {base * 1000:.0f} ms; ratio {full / base:.1f}x")
    print("offers per provider: " + ", ".join(f"{p} {n}" for p, n in counts.most_common()))

    seeds, reads = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(f"sqlite:///{Path(tmp) / 'p.sqlite'}")
            start = time.perf_counter()
            offers = store.all_offers()
            seeds.append(time.perf_counter() - start)
            start = time.perf_counter()
            store.all_offers()
            reads.append(time.perf_counter() - start)
            store.close()
    print(f"fresh SQLite store: first all_offers (seed + read) {statistics.median(seeds) * 1000:.0f} ms for "
          f"{len(offers)} offers; memoized read {statistics.median(reads) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
