"""Memory and CPU of one ``gpucost serve`` process, idle and under a short loopback load.

The figures size the Kubernetes requests and limits in ``infra/k8s/deployment.yaml``.

    .venv/bin/python bench/serve_footprint.py                      # SQLite store in a temp dir
    .venv/bin/python bench/serve_footprint.py --db-url postgresql+psycopg://...  --clients 4 --seconds 20

The server runs on the bundled snapshot. The load is a mix of quotes (80 %, each a different
workload, so none is answered from the server's answer cache), offer listings (15 %) and
``/healthz`` (5 %) from ``--clients`` threads for ``--seconds``. Reported: resident
memory after start, after the first quote (store opened, caches warm), its peak during the load
(VmHWM), CPU seconds the server used during the load, and so the cores it kept busy and the CPU
time per request. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

QUOTE = {
    "workload": {"model": "llama-3-8b", "method": "qlora", "seq_len": 2048, "tokens": 100_000_000},
    "top": 10,
}
MODELS = ("llama-3-8b", "mistral-7b", "qwen2.5-1.5b", "qwen2.5-7b", "gpt2", "roberta-base")
METHODS = ("full", "lora", "qlora")


def _random_quote(rng: random.Random) -> dict[str, object]:
    """A quote request that differs from the others (the server keeps answers to identical ones)."""
    workload = {
        "model": rng.choice(MODELS), "method": rng.choice(METHODS), "seq_len": rng.choice((512, 1024, 2048)),
        "tokens": rng.randrange(10_000_000, 2_000_000_000),
    }
    return {"workload": workload, "top": 10}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _proc_status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of /proc/PID/stat (1-based, counting pid and comm).
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _request(client: httpx.Client, rng: random.Random) -> tuple[str, float, int]:
    pick = rng.random()
    start = time.perf_counter()
    if pick < 0.80:
        kind, r = "quote", client.post("/v1/quote", json=_random_quote(rng))
    elif pick < 0.95:
        kind, r = "offers", client.get("/v1/offers", params={"gpu": "A100-80GB", "limit": 50})
    else:
        kind, r = "healthz", client.get("/healthz")
    return kind, time.perf_counter() - start, r.status_code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--db-url", help="price store URL; default: a fresh SQLite file")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="gpucost-footprint-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(
        GPUCOST_DB_URL=args.db_url or f"sqlite:///{tmp}/prices.sqlite", XDG_DATA_HOME=tmp,
        AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true",
    )
    port = _free_port()
    gpucost = Path(sys.executable).with_name("gpucost")
    proc = subprocess.Popen(
        [str(gpucost), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("server did not start")
                time.sleep(0.1)
            time.sleep(1.0)
            rss_idle_kib = _proc_status_kib(proc.pid, "VmRSS")
            first = client.post("/v1/quote", json=QUOTE)
            first.raise_for_status()
            rss_warm_kib = _proc_status_kib(proc.pid, "VmRSS")

        latencies: dict[str, list[float]] = {"quote": [], "offers": [], "healthz": []}
        errors = dropped = shed = 0
        lock = threading.Lock()
        stop_at = time.monotonic() + args.seconds

        def worker(seed: int) -> None:
            nonlocal errors, dropped, shed
            rng = random.Random(seed)
            c = httpx.Client(base_url=base, timeout=120)
            while time.monotonic() < stop_at:
                try:
                    kind, seconds, status = _request(c, rng)
                except httpx.TransportError:
                    # A connection the server dropped: count it, and go on with a new one.
                    c.close()
                    c = httpx.Client(base_url=base, timeout=120)
                    with lock:
                        dropped += 1
                    continue
                with lock:
                    latencies[kind].append(seconds)
                    # 429 is the server shedding load by design, not an error of the bench.
                    errors += status not in (200, 429)
                    shed += status == 429
            c.close()

        cpu_before, wall_before = _cpu_s(proc.pid), time.monotonic()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        rss_samples = []
        while any(t.is_alive() for t in threads):
            rss_samples.append(_proc_status_kib(proc.pid, "VmRSS"))
            time.sleep(0.2)
        for t in threads:
            t.join()
        cpu_s, wall_s = _cpu_s(proc.pid) - cpu_before, time.monotonic() - wall_before
        peak_kib = _proc_status_kib(proc.pid, "VmHWM")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)

    requests = sum(len(v) for v in latencies.values())
    mib = 1024.0
    figures = {
        "clients": args.clients,
        "seconds": round(wall_s, 1),
        "store": "postgresql" if args.db_url and args.db_url.startswith("postgresql") else "sqlite",
        "rss_idle_mib": round(rss_idle_kib / mib, 1),
        "rss_after_first_quote_mib": round(rss_warm_kib / mib, 1),
        "rss_median_under_load_mib": round(statistics.median(rss_samples) / mib, 1) if rss_samples else None,
        "rss_peak_mib": round(peak_kib / mib, 1),
        "requests": requests,
        "errors": errors,
        "shed_429": shed,
        "dropped_connections": dropped,
        "requests_per_s": round(requests / wall_s, 1),
        "server_cpu_s": round(cpu_s, 2),
        "server_cores_busy": round(cpu_s / wall_s, 2),
        "cpu_ms_per_request": round(1000 * cpu_s / max(requests, 1), 1),
        "p50_ms": {k: round(1000 * statistics.median(v), 1) for k, v in latencies.items() if v},
    }
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:28} {value}")


if __name__ == "__main__":
    main()
