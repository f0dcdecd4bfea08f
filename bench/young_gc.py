"""How often the cycle collector should visit young objects: distinct quotes in one process, the
young-generation thresholds interleaved.

    .venv/bin/python bench/young_gc.py [--thresholds 700,10000,50000] [--runs 40]
        [--skypilot-catalog ../shared/reference/skypilot-catalog]

Seeds a fresh SQLite store with the bundled snapshot (and SkyPilot's catalog when given), answers
one warm-up quote of each kind, freezes what survived (as a served process does once its heap is
large: ``service.api.heap``), then asks ``--runs`` distinct quotes of each kind per threshold
(``restricted``: 8xA100 on aws/gcp, a new token count each; ``tokens``: every provider, GPU and
build, a new token count each; ``model``: a model size nobody asked before), the threshold set
before each quote and the order reversed every round, so a change in the machine's load falls on
every threshold alike. Prints p50 per kind and threshold, and each over the first threshold's.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 20_000_000, "seq_len": 512}
RESTRICTED = {"gpus": ["A100"], "max_gpus": 8, "providers": ["aws", "gcp"], "allow_spot": False,
              "include_local": False}
_NEW = itertools.count(1)


def body(kind: str) -> dict[str, Any]:
    k = next(_NEW)
    w: dict[str, Any] = {**WORKLOAD, "tokens": WORKLOAD["tokens"] + 1_000 * k}
    if kind == "model":
        w["model"] = {"params_b": round(0.3 + 0.0007 * k, 4), "name": f"young-{k}"}
    out: dict[str, Any] = {"workload": w, "top": 5}
    if kind == "restricted":
        out["constraints"] = RESTRICTED
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thresholds", default="700,10000,50000",
                    help="young-generation thresholds compared (the first is the baseline)")
    ap.add_argument("--runs", type=int, default=40, help="quotes of each kind per threshold")
    ap.add_argument("--skypilot-catalog", type=Path, help="also import this SkyPilot catalog folder")
    args = ap.parse_args()
    thresholds = [int(t) for t in args.thresholds.split(",")]
    work = Path(tempfile.mkdtemp(prefix="gpucost-young-"))
    os.environ.update(GPUCOST_DB_URL=f"sqlite:///{work / 'g.sqlite'}", XDG_DATA_HOME=str(work),
                      AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    sys.path.insert(0, str(REPO))
    from pricing.store.repository import open_store
    from service.answers import quote_answer
    from service.schemas import QuoteRequest

    if args.skypilot_catalog is not None:
        gpucost = Path(sys.executable).with_name("gpucost")
        subprocess.run([str(gpucost), "prices", "import", "--format", "skypilot", str(args.skypilot_catalog), "--json"],
                       env=os.environ, check=True, stdout=subprocess.DEVNULL)
    store = open_store(os.environ["GPUCOST_DB_URL"])
    kinds = ("restricted", "tokens", "model")
    for kind in kinds:
        quote_answer(QuoteRequest.model_validate(body(kind)), store)
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
                    req = QuoteRequest.model_validate(body(kind))
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
