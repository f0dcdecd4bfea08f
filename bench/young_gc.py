"""How often the cycle collector should visit young objects: distinct quotes in one process, the
young-generation thresholds interleaved.

    .venv/bin/python bench/young_gc.py [--thresholds 700,10000,50000] [--runs 40]
        [--skypilot-catalog ../shared/reference/skypilot-catalog]

Seeds a fresh SQLite store with the bundled snapshot (and SkyPilot's catalog when given), answers
one warm-up quote of each kind, freezes what survived (as a served process does once its heap is
large: ``service.api.heap``), then asks ``--runs`` distinct quotes of each kind per threshold
(``bench/ab_quotes.py``'s: ``restricted``, 8xA100 on aws/gcp, a new token count each; ``open``,
every provider, GPU and build, a new token count each; ``model``, a model size nobody asked
before), the threshold set before each quote and the order reversed every round, so a change in
the machine's load falls on every threshold alike. Prints p50 per kind and threshold, and each over the first threshold's.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_quotes import body  # the same three kinds of distinct question
from cold_quote_profile import bench_store

_NEW = itertools.count(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thresholds", default="700,10000,50000",
                    help="young-generation thresholds compared (the first is the baseline)")
    ap.add_argument("--runs", type=int, default=40, help="quotes of each kind per threshold")
    ap.add_argument("--skypilot-catalog", type=Path, help="also import this SkyPilot catalog folder")
    args = ap.parse_args()
    thresholds = [int(t) for t in args.thresholds.split(",")]
    store = bench_store("gpucost-young-", args.skypilot_catalog)
    from service.answers import quote_answer
    from service.schemas import QuoteRequest

    kinds = ("restricted", "open", "model")
    for kind in kinds:
        quote_answer(QuoteRequest.model_validate(body(kind, next(_NEW), 0)), store)
    gc.collect()
    gc.freeze()
    older = gc.get_threshold()[1:]
    print(f"in-process quote p50 of {args.runs} per threshold, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}:")
    try:
        for kind in kinds:
            times: dict[int, list[float]] = {t: [] for t in thresholds}
            for r in range(args.runs):
                for t in thresholds if r % 2 == 0 else reversed(thresholds):
                    req = QuoteRequest.model_validate(body(kind, next(_NEW), 0))
                    gc.set_threshold(t, *older)
                    start = time.perf_counter()
                    quote_answer(req, store)
                    times[t].append(time.perf_counter() - start)
            base = statistics.median(times[thresholds[0]])
            cells = "  ".join(f"{t:>6}: {statistics.median(v) * 1e3:6.2f} ms (x{statistics.median(v) / base:.2f})"
                              for t, v in times.items())
            print(f"  {kind:10} {cells}")
    finally:
        gc.set_threshold(thresholds[0], *older)


if __name__ == "__main__":
    main()
