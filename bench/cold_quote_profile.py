"""Where a new question's time goes: in-process quotes on the bundled catalog, repeated and new.

Times ``service.answers.quote_answer`` (what ``POST /v1/quote`` and ``gpucost quote`` compute) on a
fresh SQLite store seeded with the bundled snapshot, p50 of ``--runs`` quotes of each kind, all
in one process after one warm-up quote, the kinds taken in turn (one of each, then again):

* ``repeat``: the same question again (every memo warm; no answer cache in-process);
* ``tokens``: the same job with a token count never asked before (the amount of training only:
  the estimates and configurations kept for the job are moved to it, ``optimizer.*.amounts``);
* ``seq_len``: a new sequence length (new memory and speed models on every GPU);
* ``model``: a model size never asked before (everything estimated anew).

Then profiles ``--profile`` quotes of one kind (``--kind``, default ``tokens``) with cProfile and
prints the functions with the most cumulative and own time.

``--collector served`` (the default) handles the cycle collector as ``gpucost serve`` does
(``service.api.heap``: young collections every 10,000 allocations, the heap frozen at the end of
every request), so the figures and the profile are what a served quote pays. ``default`` leaves
CPython's settings: collections then walk the long-lived memos and land on whichever line
allocates (a scratch profile put 4.4 % of new-model quotes in ``ranges._combine`` that way).

Run: .venv/bin/python bench/cold_quote_profile.py [--runs 15] [--kind model] [--top 30]
         [--collector served|default] [--skypilot-catalog ../shared/reference/skypilot-catalog]
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from workdir import work_folder  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 20_000_000, "seq_len": 512}
_NEW = itertools.count(1)


def body(kind: str) -> dict[str, Any]:
    k = next(_NEW)
    w = dict(WORKLOAD)
    if kind != "repeat":
        w["tokens"] = WORKLOAD["tokens"] + 1_000 * k
    if kind == "seq_len":
        w["seq_len"] = 256 + k
    elif kind == "model":
        w["model"] = {"params_b": round(0.3 + 0.0007 * k, 4), "name": f"profile-{k}"}
    return {"workload": w, "top": 5}


def bench_store(prefix: str, skypilot_catalog: Path | None = None) -> Any:
    """A fresh SQLite store in a temporary folder, seeded with the bundled snapshot (and
    ``skypilot_catalog`` imported by ``gpucost prices import``), for quotes in this process."""
    work = work_folder(prefix)  # removed at exit
    os.environ.update(GPUCOST_DB_URL=f"sqlite:///{work / 'g.sqlite'}", XDG_DATA_HOME=str(work),
                      AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    sys.path.insert(0, str(REPO))
    from pricing.store.repository import open_store

    if skypilot_catalog is not None:
        import subprocess

        gpucost = Path(sys.executable).with_name("gpucost")
        subprocess.run([str(gpucost), "prices", "import", "--format", "skypilot", str(skypilot_catalog), "--json"],
                       env=os.environ, check=True, stdout=subprocess.DEVNULL)
    return open_store(os.environ["GPUCOST_DB_URL"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15, help="quotes of each kind timed")
    ap.add_argument("--kind", choices=("repeat", "tokens", "seq_len", "model"), default="tokens")
    ap.add_argument("--profile", type=int, default=10, help="quotes of --kind profiled")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--skypilot-catalog", type=Path,
                    help="also import this SkyPilot catalog folder (the store bench/vs_skypilot.py quotes on)")
    ap.add_argument("--collector", choices=("served", "default"), default="served",
                    help="the cycle collector as gpucost serve runs it, or CPython's defaults")
    args = ap.parse_args()
    store = bench_store("gpucost-profile-", args.skypilot_catalog)
    from service.answers import quote_answer
    from service.api import heap
    from service.schemas import QuoteRequest

    served = args.collector == "served"
    if served:
        heap.keep_long_lived()

    def answer(req: Any) -> float:
        """One quote's seconds; served, the heap is then frozen (untimed), as the server's middleware does."""
        mark = heap.request_started()
        t = time.perf_counter()
        quote_answer(req, store)
        seconds = time.perf_counter() - t
        heap.request_ended(mark, 200)
        return seconds

    first = answer(QuoteRequest.model_validate(body("repeat")))
    print(f"first quote (store opened, offers pruned, estimates made): {first:.2f} s")

    kinds = ("repeat", "tokens", "seq_len", "model")
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    # Round robin over the kinds, so a change in the machine's load shifts all of them alike.
    for _ in range(args.runs):
        for kind in kinds:
            times[kind].append(answer(QuoteRequest.model_validate(body(kind))))
    p50 = {kind: statistics.median(times[kind]) for kind in kinds}
    catalog = "bundled catalog" + (" + SkyPilot's" if args.skypilot_catalog is not None else "")
    collector = "the collector as served" if served else "CPython's collector settings"
    print(f"in-process quote p50 of {args.runs}, unrestricted, {catalog}, {collector}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}:")
    for kind, s in p50.items():
        print(f"  {kind:8} {s * 1e3:8.1f} ms  (x{s / p50['repeat']:.1f} the repeated question)")
    reqs = [QuoteRequest.model_validate(body(args.kind)) for _ in range(args.profile)]
    prof = cProfile.Profile()
    prof.enable()
    for req in reqs:
        answer(req)
    prof.disable()
    print(f"\ncProfile of {args.profile} '{args.kind}' quotes (profiling slows each call):")
    stats = pstats.Stats(prof, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
