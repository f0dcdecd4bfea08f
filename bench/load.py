"""Load on a real ``gpucost serve`` over loopback: throughput, p50, p99, errors, and quote ÷ healthz.

    .venv/bin/python bench/load.py [--clients 1,4,16,64] [--seconds 15] [--distinct [MODES]] [--big-plan 300]
                                   [--mix served|quotes]

Starts ``gpucost serve`` on 127.0.0.1 (a free port) over a fresh SQLite store holding the bundled
catalog, waits for ``/readyz``, then for each client count runs that many client threads for
``--seconds``, each sending the mix quotes 80 %, offers 15 %, plans 5 % back to back on its own
keep-alive connection (``--mix quotes``: nothing but quotes, so the ratio below is that of clients
who only quote, without the plans and offers pages a served mix also runs). One more thread probes
``/healthz`` every 20 ms during the same window: the baseline of the ratio, measured on the same
server under the same load.

Quotes come from a pool of 24 workloads (presets x methods x amounts); ``--distinct`` makes
every quote unique instead, so none is answered from the answer cache: the honest figure for a
question nobody asked before. ``--distinct`` takes a comma-separated list of modes, each run in
turn on the same server (one table each): ``pool`` (the 24 workloads, repeated), ``tokens`` (the
pool's jobs with a new token count each time; the default), ``seq_len`` (a new sequence length
each time: new memory and speed models) and ``model`` (a model size nobody asked before each
time). ``--big-plan N`` then sends one N-job plan and probes ``/healthz`` until it is answered,
printing the slowest probe.

Errors are 5xx answers and failed connections; 429 (admission refused) is counted apart.
``server_rss_mb`` is the resident memory of every server process (workers and solve workers
included) after each level: it must level off however many new questions came. ``split`` says how
the clients' kept-alive connections fell on the server's processes (``2+2``: two each; with
``--workers 2`` the kernel hands each new connection to whichever process accepts it first) and
how many clients shared the process the ``/healthz`` probe landed on: a level whose clients crowd
one process, or whose probe sits alone, gives another ratio than an even one. A busier process
closes a kept-alive connection to move its client (``service/api/balance.py``, unless
``GPUCOST_SERVE_BALANCE=off``): ``reconnects`` counts the connections the clients opened again, and
``client_quote_p50_ms`` gives each client's own quote p50, least first (alike when every client
gets the same service). Every request loop is bounded in time; nothing leaves the loopback interface.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from code_state import describe  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
MODELS = ["gpt2", "qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3-8b", "mistral-7b", "bert-base"]
METHODS = ["full", "lora", "qlora"]
TOKENS = [1e7, 1e8, 1e9]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@contextmanager
def server(env_extra: dict[str, str] | None = None, args: list[str] | None = None,
           log_path: Path | None = None, cwd: Path = REPO, pids: list[int] | None = None) -> Iterator[str]:
    """A ``gpucost serve`` subprocess on loopback; yields its base URL once ``/readyz`` is 200.
    ``cwd``: the checkout whose code serves (``bench/ab_quotes.py`` serves an earlier revision);
    ``pids``: gets the subprocess's pid (``tree_rss_mb``)."""
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="gpucost-load-"))
    env = {
        **os.environ, "GPUCOST_DB_URL": f"sqlite:///{tmp / 'prices.sqlite'}",
        # No cloud SDK may look for credentials off this machine.
        "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true",
        **(env_extra or {}),
    }
    log = open(log_path or tmp / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-c", "from service.cli import main; main()", "serve", "--host", HOST, "--port", str(port), *(args or [])],
        cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://{HOST}:{port}"
    if pids is not None:
        pids.append(proc.pid)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"gpucost serve exited with {proc.returncode}; see {log.name}")
            try:
                status, _ = request(port, "GET", "/readyz", timeout=5)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gpucost serve did not become ready within 120 s")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if sys.exc_info()[0] is None:  # kept, with the server's log, only when something failed
            shutil.rmtree(tmp, ignore_errors=True)


def _tree(pid: int) -> list[psutil.Process]:
    """``pid``'s process and every process below it (none once it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def tree_rss_mb(pid: int) -> float:
    """The resident memory of ``pid`` and every process below it, in MB of 2**20 bytes (as VmRSS
    reads): a served process's memory must stay bounded however many new questions it answers."""
    total = 0
    for p in _tree(pid):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue  # gone meanwhile
    return round(total / 2**20, 1)


def serving_processes(pid: int, port: int, client_ports: set[int]) -> dict[int, int]:
    """Which process below ``pid`` holds the server's end of each of ``client_ports``' connections to
    ``port``. With ``--workers N`` the kernel hands each new connection to whichever process accepts
    it first, and a kept-alive connection stays there."""
    out: dict[int, int] = {}
    for p in _tree(pid):
        try:
            conns = p.net_connections(kind="tcp")
        except psutil.Error:
            continue
        for c in conns:
            if c.laddr and c.raddr and c.laddr.port == port and c.raddr.port in client_ports:
                out[c.raddr.port] = p.pid
    return out


def request(port: int, method: str, path: str, body: Any = None, timeout: float = 120,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        return _send(conn, method, path, body, headers)
    finally:
        conn.close()


def _send(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None,
          headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"content-type": "application/json", **(headers or {})} if data is not None else dict(headers or {})
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    return resp.status, resp.read()


MODES = ("pool", "tokens", "seq_len", "model")
# A number no earlier question of this process used (next() on a count is atomic in CPython).
_FRESH = itertools.count(1)


def _mode(distinct: bool | str) -> str:
    if isinstance(distinct, str):
        return distinct
    return "tokens" if distinct else "pool"


def quote_body(rng: random.Random, distinct: bool | str) -> dict[str, Any]:
    """A quote from the pool of 24 workloads, or (``distinct``: True or a mode) a new question."""
    i = rng.randrange(24)
    mode = _mode(distinct)
    w: dict[str, Any] = {"model": MODELS[i % 6], "method": METHODS[(i // 6) % 3], "tokens": TOKENS[i % 3]}
    if mode != "pool":
        k = next(_FRESH)
        w["tokens"] = rng.uniform(1e7, 1e9) + k  # the amount is new in every mode
        if mode == "seq_len":
            w["seq_len"] = 128 + k % 1900
        elif mode == "model":
            w["model"] = {"params_b": round(0.1 + (0.0137 * k) % 3.0, 4) + k * 1e-6, "name": f"load-{k}"}
    return {"workload": w}


def plan_body(rng: random.Random) -> dict[str, Any]:
    return {"jobs": [
        {"name": f"job-{j}", "workload": {"model": rng.choice(MODELS), "method": rng.choice(METHODS),
                                          "tokens": rng.choice(TOKENS)}, "runs_per_month": rng.randint(1, 8)}
        for j in range(3)
    ], "horizon_months": 12}


OFFER_PATHS = ["/v1/offers?gpu=A100&limit=20", "/v1/offers?gpu=H100&gpu_count=8&limit=10",
               "/v1/offers?gpu=RTX4090&limit=20", "/v1/offers?gpu=T4&spot=true&limit=20"]


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: int = 0
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The local port of each connection the clients ("clients") and the prober ("healthz") opened.
    ports: dict[str, list[int]] = field(default_factory=dict)

    def opened(self, role: str, conn: http.client.HTTPConnection) -> None:
        if conn.sock is not None:
            with self.lock:
                self.ports.setdefault(role, []).append(conn.sock.getsockname()[1])

    # Each client's quote latencies, by client: whether the server served them alike.
    by_client: dict[int, list[float]] = field(default_factory=dict)

    def add(self, kind: str, seconds: float, status: int, client: int | None = None) -> None:
        with self.lock:
            if status >= 500 or status == 0:
                self.errors += 1
            elif status == 429:
                self.refused += 1
            else:
                self.latencies.setdefault(kind, []).append(seconds)
                if client is not None and kind == "quote":
                    self.by_client.setdefault(client, []).append(seconds)


# The share of quotes and of offers pages in each mix, cumulative (plans the rest).
MIXES = {"served": (0.80, 0.95), "quotes": (1.0, 1.0)}


def mix_label(mix: str) -> str:
    """``MIXES[mix]`` in words: "quotes 80 %, offers 15 %, plans 5 %"."""
    quotes, offers = MIXES[mix]
    shares = {"quotes": quotes, "offers": offers - quotes, "plans": 1.0 - offers}
    return ", ".join(f"{kind} {share:.0%}".replace("%", " %") for kind, share in shares.items() if share > 0)


def _client(port: int, seconds: float, seed: int, distinct: bool | str, tally: Tally, mix: str = "served",
            index: int | None = None) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection(HOST, port, timeout=120)
    end = time.monotonic() + seconds
    quotes, offers = MIXES[mix]
    while time.monotonic() < end:
        roll = rng.random()
        if roll < quotes:
            kind, method, path, body = "quote", "POST", "/v1/quote", quote_body(rng, distinct)
        elif roll < offers:
            kind, method, path, body = "offers", "GET", rng.choice(OFFER_PATHS), None
        else:
            kind, method, path, body = "plan", "POST", "/v1/plan", plan_body(rng)
        started = time.perf_counter()
        fresh = conn.sock is None
        try:
            status, _ = _send(conn, method, path, body)
            if fresh:
                tally.opened("clients", conn)
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
            conn = http.client.HTTPConnection(HOST, port, timeout=120)
        tally.add(kind, time.perf_counter() - started, status, index)
    conn.close()


def _prober(port: int, stop: threading.Event, tally: Tally, every_s: float = 0.02) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    while not stop.is_set():
        started = time.perf_counter()
        fresh = conn.sock is None
        try:
            status, _ = _send(conn, "GET", "/healthz")
            if fresh:
                tally.opened("healthz", conn)
        except (OSError, http.client.HTTPException):
            status = 0
            conn.close()
            conn = http.client.HTTPConnection(HOST, port, timeout=30)
        tally.add("healthz", time.perf_counter() - started, status)
        stop.wait(every_s)
    conn.close()


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_level(port: int, clients: int, seconds: float, distinct: bool | str, seed: int = 0,
              mix: str = "served", server_pid: int | None = None) -> dict[str, Any]:
    """One level; with ``server_pid``, also which server process each connection landed on, read
    halfway through (``split``)."""
    tally = Tally()
    stop = threading.Event()
    probe = threading.Thread(target=_prober, args=(port, stop, tally))
    workers = [threading.Thread(target=_client, args=(port, seconds, seed + i, distinct, tally, mix, i))
               for i in range(clients)]
    landed: dict[str, Any] = {}
    if server_pid is not None:
        def look() -> None:
            # A client whose connection a server process just closed (balance.py) has none for a
            # moment: look again, briefly, until every client's is found.
            for _ in range(20):
                with tally.lock:
                    ports = {role: list(v) for role, v in tally.ports.items()}
                split = _split(serving_processes(server_pid, port, {q for v in ports.values() for q in v}), ports)
                if sum(split["clients_per_process"]) >= clients:
                    break
                time.sleep(0.05)
            landed.update(split)

        halfway = threading.Timer(seconds / 2, look)
        halfway.start()
    started = time.perf_counter()
    probe.start()
    for w in workers:
        w.start()
    for w in workers:
        w.join(seconds + 300)
    if server_pid is not None:
        halfway.join(30)
    elapsed = time.perf_counter() - started
    stop.set()
    probe.join(30)
    lat = tally.latencies
    served = sum(len(v) for k, v in lat.items() if k != "healthz")
    out: dict[str, Any] = {
        "clients": clients, "seconds": round(elapsed, 1), "requests": served,
        "throughput_rps": round(served / elapsed, 1), "errors": tally.errors, "refused_429": tally.refused,
    }
    for kind in ("quote", "offers", "plan", "healthz"):
        out[f"{kind}_n"] = len(lat.get(kind, []))
        out[f"{kind}_p50_ms"] = round(pct(lat.get(kind, []), 0.50) * 1000, 2)
        out[f"{kind}_p99_ms"] = round(pct(lat.get(kind, []), 0.99) * 1000, 2)
    out["quote_over_healthz_p50"] = round(out["quote_p50_ms"] / out["healthz_p50_ms"], 2)
    # Each client's quote p50, least first: a client whose connection shares a server process with
    # more others waits longer than one that has a process to itself.
    out["client_quote_p50_ms"] = sorted(round(pct(v, 0.50) * 1000, 2) for v in tally.by_client.values())
    # Connections the clients opened again after a server process closed theirs (balance.py).
    out["reconnects"] = max(0, len(tally.ports.get("clients", [])) - clients)
    out.update(landed)
    return out


def _split(owner: dict[int, int], ports: dict[str, list[int]]) -> dict[str, Any]:
    """How the clients' connections fell on the server's processes: the count per process, most first,
    and how many clients shared the process the ``/healthz`` probe landed on."""
    per: dict[int, int] = {}
    for q in ports.get("clients", []):
        if q in owner:
            per[owner[q]] = per.get(owner[q], 0) + 1
    probe = next((owner[q] for q in ports.get("healthz", []) if q in owner), None)
    counts = sorted(per.values(), reverse=True)
    beside = per.get(probe, 0) if probe is not None else None
    return {"clients_per_process": counts, "healthz_beside": beside,
            "split": "+".join(map(str, counts)) + (f", healthz by {beside}" if beside is not None else "")}


def big_plan(port: int, jobs: int) -> dict[str, Any]:
    body = {"jobs": [
        {"name": f"job-{j}", "workload": {"model": MODELS[j % 6], "method": METHODS[j % 3],
                                          "tokens": 1e7 * (1 + j % 11)}, "runs_per_month": 1 + j % 4}
        for j in range(jobs)
    ], "horizon_months": 12, "time_limit_s": 600}
    result: dict[str, Any] = {}

    def send() -> None:
        started = time.perf_counter()
        status, data = request(port, "POST", "/v1/plan", body, timeout=600)
        result.update(status=status, seconds=round(time.perf_counter() - started, 2),
                      detail=(json.loads(data).get("detail") if status != 200 else None))

    sender = threading.Thread(target=send)
    tally = Tally()
    stop = threading.Event()
    sender.start()
    probe = threading.Thread(target=_prober, args=(port, stop, tally, 0.05))
    probe.start()
    sender.join(660)
    stop.set()
    probe.join(30)
    health = tally.latencies.get("healthz", [])
    return {
        "jobs": jobs, "plan_status": result.get("status"), "plan_seconds": result.get("seconds"),
        "plan_detail": result.get("detail"), "healthz_probes": len(health), "healthz_errors": tally.errors,
        "healthz_p50_ms": round(pct(health, 0.5) * 1000, 2), "healthz_max_ms": round(max(health, default=0) * 1000, 2),
    }


COLUMNS = ["clients", "throughput_rps", "quote_p50_ms", "quote_p99_ms", "offers_p50_ms", "offers_p99_ms",
           "plan_p50_ms", "plan_p99_ms", "healthz_p50_ms", "healthz_p99_ms", "quote_over_healthz_p50",
           "errors", "refused_429", "server_rss_mb", "split", "reconnects", "client_quote_p50_ms"]


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(r.get(c, "-")) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--distinct", nargs="?", const="tokens", default="pool",
                    help="every quote unique (no answer-cache hits): comma-separated modes of " + ", ".join(MODES))
    ap.add_argument("--big-plan", type=int, default=0, help="then one plan of this many jobs")
    ap.add_argument("--workers", type=int, default=1,
                    help="server processes (gpucost serve --workers): one per core uses every core for quotes")
    ap.add_argument("--mix", choices=sorted(MIXES), default="served",
                    help="; ".join(f"{m}: {mix_label(m)}" for m in MIXES).replace("%", "%%"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.workers <= 64:
        ap.error("--workers: 1 to 64")
    levels = [int(c) for c in args.clients.split(",") if c.strip()]
    modes = [m.strip() for m in args.distinct.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        ap.error(f"--distinct: modes are {', '.join(MODES)}")
    code = describe()
    by_mode: dict[str, list[dict[str, Any]]] = {}
    pids: list[int] = []
    with server(args=["--workers", str(args.workers)], pids=pids) as base:
        port = int(base.rsplit(":", 1)[1])
        for mode in modes:
            # Warm up: the store's memo, the offer index and the estimator caches.
            rng = random.Random(99)
            for _ in range(30):
                request(port, "POST", "/v1/quote", quote_body(rng, mode))
            by_mode[mode] = []
            for n in levels:
                row = run_level(port, n, args.seconds, mode, seed=100 * n, mix=args.mix, server_pid=pids[0])
                row["server_rss_mb"] = tree_rss_mb(pids[0])  # every server process, after the level
                by_mode[mode].append(row)
        plan_row = big_plan(port, args.big_plan) if args.big_plan else None
    rows = by_mode[modes[0]]
    if args.json:
        print(json.dumps({"levels": rows, "modes": by_mode, "big_plan": plan_row, "distinct": args.distinct,
                          "mix": args.mix, "code": code}))
        return
    labels = {"pool": "quotes from a pool of 24 workloads", "tokens": "distinct quotes: a new token count each",
              "seq_len": "distinct quotes: a new seq_len each", "model": "distinct quotes: a new model each"}
    print(code)
    print(f"gpucost serve on loopback, bundled catalog, {os.cpu_count()} CPUs, {args.seconds:g} s per level, "
          f"{mix_label(args.mix)}; latencies in ms")
    for mode in modes:
        print(f"\n{labels[mode]}:")
        print(markdown(by_mode[mode]))
    for mode in modes:
        # Repeated questions are held to 3x /healthz, questions nobody asked before to 5x.
        limit = 3 if mode == "pool" else 5
        for r in by_mode[mode]:
            verdict = f"<= {limit}" if r["quote_over_healthz_p50"] <= limit else f"> {limit}"
            print(f"{mode:>8}, {r['clients']:>3} clients: quote p50 / healthz p50 = {r['quote_over_healthz_p50']} "
                  f"({verdict}), errors {r['errors']}, 429 {r['refused_429']}; clients per process {r.get('split', '-')}")
    if plan_row:
        print(f"one {plan_row['jobs']}-job plan: status {plan_row['plan_status']} after {plan_row['plan_seconds']} s; "
              f"{plan_row['healthz_probes']} healthz probes meanwhile, p50 {plan_row['healthz_p50_ms']} ms, "
              f"slowest {plan_row['healthz_max_ms']} ms, errors {plan_row['healthz_errors']}")


if __name__ == "__main__":
    main()
