"""A question asked of a server that was busy a moment ago, against one asked after it sat idle.

    .venv/bin/python bench/idle_gap.py [--rounds 60] [--kinds healthz,restricted,open,model]
        [--gaps 10,100] [--pin CPUS] [--in-process]

Starts ``gpucost serve`` on loopback over a fresh SQLite store holding the bundled snapshot (the
answer cache off, so every quote is computed), then for each kind asks, round after round:

* three requests back to back, then a fourth, timed ("back to back": the server was busy);
* for each gap in ``--gaps`` (milliseconds): the client sleeps that long, then one request, timed;
* the client spins 100 ms on its own CPU (the server idle, the machine not), then one, timed;
* another process spins 100 ms on the server's own CPUs (the server's CPU busy, not idle, but
  with someone else's work), then one, timed: what a quote costs after a different program ran
  where the server runs (``vs_skypilot.py --interleaved`` puts SkyPilot's optimizer there or
  beside it). The same cost as after 100 ms idle says it is not the CPU's wake-up.

Every quote is a new question (``bench/ab_quotes.py``'s kinds: ``restricted``, 8xA100 on aws/gcp;
``open``, every provider, GPU and build; both with a new token count; ``model``, a model size
nobody asked before); ``healthz`` is ``GET /healthz``. A person who clicks gets the idle case; a
script that sends its questions back to back gets the busy one. ``--pin 0`` binds every thread of
the server to CPU 0 (``taskset``): the server's event loop and the thread a quote runs on then hand
the request to each other on one CPU. Prints p50 per kind and case. Nothing leaves loopback.

``--in-process`` asks the same questions of ``service.answers.quote_answer`` in this one thread,
with no server, no socket and no other thread (the heap frozen after each, as a server does): a
cost that shows up here after a pause is the quote's own, not the server's.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_quotes import body  # the same kinds of distinct question
from load import HOST, server

SPIN_S = 0.1


def pin(port: int, cpus: str) -> None:
    """Every thread of the server listening on ``port`` to ``cpus``."""
    if shutil.which("taskset") is None:
        raise SystemExit("--pin needs taskset (util-linux)")
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(server_pid(port))], check=True, stdout=subprocess.DEVNULL)


# A process that spins on command: one line in ("seconds"), one line out when done.
_SPINNER = """
import sys, time
for line in sys.stdin:
    t = time.perf_counter()
    while time.perf_counter() - t < float(line):
        pass
    print("done", flush=True)
"""


def server_pid(port: int) -> int:
    found = subprocess.run(["pgrep", "-f", "--", f"--port {port} "], capture_output=True, text=True, check=False)
    pids = found.stdout.split()
    if len(pids) != 1:
        raise SystemExit(f"expected one server process on port {port}, found {pids}")
    return int(pids[0])


def spin(seconds: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        pass


def measure(ask: Callable[[str], float], kind: str, rounds: int, gaps: list[float],
            spin_beside: Callable[[float], None] | None = None) -> dict[str, list[float]]:
    """Seconds per case of ``rounds`` rounds of ``kind`` (see the module's docstring)."""
    for _ in range(10):
        ask(kind)
    cases: dict[str, list[float]] = {"back to back": []}
    for _ in range(rounds):
        for _ in range(3):
            ask(kind)
        cases["back to back"].append(ask(kind))
        for gap in gaps:
            time.sleep(gap / 1e3)
            cases.setdefault(f"after {gap:g} ms idle", []).append(ask(kind))
        spin(SPIN_S)  # the client busy (in-process: this very thread)
        cases.setdefault(f"after the client spun {SPIN_S * 1e3:g} ms", []).append(ask(kind))
        if spin_beside is not None:
            spin_beside(SPIN_S)
            cases.setdefault(f"after another process spun {SPIN_S * 1e3:g} ms on its CPU", []).append(ask(kind))
    return cases


def report(kind: str, cases: dict[str, list[float]]) -> None:
    busy = statistics.median(cases["back to back"])
    row = "  ".join(f"{case} {statistics.median(ts) * 1e3:6.2f} ms (x{statistics.median(ts) / busy:.2f})"
                    for case, ts in cases.items())
    print(f"  {kind:10} {row}")


def in_process(kinds: list[str], rounds: int, gaps: list[float]) -> None:
    """The same rounds on ``quote_answer`` in this thread: no server, socket or thread hop."""
    import gc

    from cold_quote_profile import bench_store

    store = bench_store("gpucost-idle-")
    from service.answers import quote_answer
    from service.api.heap import keep_long_lived
    from service.schemas import QuoteRequest

    keep_long_lived()  # the young-generation threshold a served process sets
    fresh = itertools.count(1)

    def ask(kind: str) -> float:
        request = QuoteRequest.model_validate(body(kind, next(fresh), 13))
        t = time.perf_counter()
        quote_answer(request, store)
        took = time.perf_counter() - t
        gc.freeze()  # what outlives a request, as a served process does at each request's end
        return took

    print(f"p50 of {rounds} rounds, in this process (no server), {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}, on CPU {','.join(map(str, sorted(os.sched_getaffinity(0))))}:")
    for kind in kinds:
        if kind == "healthz":
            continue  # a route, not a computation
        report(kind, measure(ask, kind, rounds, gaps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--kinds", default="healthz,restricted,open,model")
    ap.add_argument("--gaps", default="10,100", help="idle gaps before a request, in milliseconds")
    ap.add_argument("--pin", help="CPUs for every thread of the server (taskset -c), e.g. 0")
    ap.add_argument("--in-process", action="store_true", help="quote_answer in this thread, no server")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    gaps = [float(g) for g in args.gaps.split(",")]
    if args.in_process:
        in_process(kinds, args.rounds, gaps)
        return
    fresh = itertools.count(1)
    with server(args=["--log-level", "warning"], env_extra={"GPUCOST_ANSWER_CACHE": "false"}) as base:
        port = int(base.rsplit(":", 1)[1])
        if args.pin:
            pin(port, args.pin)
        conn = http.client.HTTPConnection(HOST, port, timeout=120)
        # Where the server runs (its binding or --pin), and a spinner kept there.
        cpus = os.sched_getaffinity(server_pid(port))
        spinner = subprocess.Popen([sys.executable, "-c", _SPINNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)

        def spin_beside(seconds: float) -> None:
            assert spinner.stdin is not None and spinner.stdout is not None
            spinner.stdin.write(f"{seconds}\n")
            spinner.stdin.flush()
            if spinner.stdout.readline().strip() != "done":
                raise RuntimeError("the spinner process stopped")

        def ask(kind: str) -> float:
            if kind == "healthz":
                method, path, data = "GET", "/healthz", None
            else:
                method, path, data = "POST", "/v1/quote", json.dumps(body(kind, next(fresh), 13)).encode()
            t = time.perf_counter()
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError(f"{path} answered {r.status}")
            return time.perf_counter() - t

        print(f"p50 of {args.rounds} rounds, one server (answer cache off), {os.cpu_count()} CPUs, "
              f"load {os.getloadavg()[0]:.1f}, server on CPU {','.join(map(str, sorted(cpus)))}"
              f"{' (--pin)' if args.pin else ''}:")
        try:
            os.sched_setaffinity(spinner.pid, cpus)
            for kind in kinds:
                report(kind, measure(ask, kind, args.rounds, gaps, spin_beside))
        finally:
            conn.close()
            if spinner.stdin is not None:
                spinner.stdin.close()
            spinner.wait(timeout=10)


if __name__ == "__main__":
    main()
