"""Memory and time to first answer: the CLI's start-up cost and the server's RSS on the full catalog.

* CLI: ``python -X importtime`` of the command module, and the wall time of ``gpucost --help``,
  ``gpucost estimate`` and ``gpucost quote --json`` once the store exists (set-up done), p50 of 5;
* server: ``gpucost serve`` on the same store: seconds until ``/readyz`` answers, the first quote's
  latency, and its resident memory (VmRSS) after start, after the first quote, after 200 quotes of
  distinct workloads (the estimator's memo growing), after a plan of 50 jobs, and after 500 and
  1,000 quotes of new models (bounded: the second 500 must leave it about where the first did).

Run: .venv/bin/python bench/footprint.py
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from cli_startup import gpucost, timed  # bench/ is on sys.path when run as a script
from code_state import describe
from workdir import work_folder

MODELS = ["llama-3-8b", "qwen2.5-7b", "qwen2.5-3b", "qwen2.5-1.5b", "qwen2.5-0.5b", "gpt2", "bert-base", "distilbert"]


def rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(m.group(1)) / 1024 if m else float("nan")


def http(method: str, url: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def workload(i: int) -> dict[str, Any]:
    return {"model": MODELS[i % len(MODELS)], "method": ["qlora", "lora", "full"][(i // len(MODELS)) % 3],
            "tokens": int(1e8 * (1 + i / 997)), "seq_len": 1024}


def wall(cmd: list[str], env: dict[str, str], n: int = 5) -> str:
    """p50 wall and CPU time of ``cmd``: on a shared, busy machine the CPU time is what the
    command itself costs."""
    w, cpu = timed(cmd, env, n)
    return f"{w:.2f} s wall, {cpu:.2f} s CPU (p50 of {n})"


def import_cost(env: dict[str, str]) -> tuple[float, list[tuple[float, str]]]:
    # What ``gpucost quote`` imports: the CLI registers only the command it is asked for.
    code = "from service.cli import app_for; app_for(['quote'])"
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env,
                         capture_output=True, text=True, check=True).stderr
    rows = []
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(2)) / 1e6, len(m.group(3)), m.group(4)))
    total = sum(s for s, depth, _ in rows if depth == 1)
    top = sorted(((s, name) for s, depth, name in rows if depth <= 3), reverse=True)[:8]
    return total, top


def main() -> None:
    measure(work_folder("gpucost-footprint-"))  # removed at exit


def measure(work: Path) -> None:
    env = {**os.environ, "GPUCOST_DB_URL": f"sqlite:///{work / 'g.sqlite'}", "XDG_DATA_HOME": str(work),
           "GPUCOST_ANSWER_CACHE": "false", "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}
    print(describe(env))
    req = work / "quote.json"
    req.write_text(json.dumps({"workload": workload(0)}))
    t = time.perf_counter()
    subprocess.run([*gpucost(), "prices", "status", "--json"], env=env, check=True, stdout=subprocess.DEVNULL)
    print(f"set-up (store created and seeded from the bundled snapshot): {time.perf_counter() - t:.1f} s")
    total, top = import_cost(env)
    print(f"CLI import (python -X importtime, the quote command's modules): {total:.2f} s; largest: "
          + ", ".join(f"{name} {s:.2f} s" for s, name in top[:6]))
    print(f"gpucost --help: {wall([*gpucost(), '--help'], env)}")
    print(f"gpucost estimate --gpu A100 (no store): "
          f"{wall([*gpucost(), 'estimate', '--request', str(req), '--gpu', 'A100', '--json'], env)}")
    print(f"gpucost quote --json (bundled catalog): {wall([*gpucost(), 'quote', '--request', str(req), '--json'], env)}")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    server = subprocess.Popen([*gpucost(), "serve", "--port", str(port), "--log-level", "warning"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                http("GET", f"{base}/readyz")
                break
            except OSError:
                if time.perf_counter() - t0 > 120:
                    raise
                time.sleep(0.05)
        ready = time.perf_counter() - t0
        rss0 = rss_mb(server.pid)
        t = time.perf_counter()
        q = http("POST", f"{base}/v1/quote", {"workload": workload(0)})
        first = time.perf_counter() - t
        rss1 = rss_mb(server.pid)
        t = time.perf_counter()
        http("POST", f"{base}/v1/quote", {"workload": workload(0)})
        second = time.perf_counter() - t
        print(f"server: ready in {ready:.2f} s; first quote {first:.2f} s (prepares the pruned catalog), "
              f"the same again {second * 1e3:.0f} ms; {q['estimate'].get('offers_total')} offers, "
              f"{q['estimate'].get('offers_considered')} considered")
        for i in range(1, 201):
            http("POST", f"{base}/v1/quote", {"workload": workload(i)})
        rss2 = rss_mb(server.pid)
        jobs = [{"name": f"j{i}", "workload": workload(500 + i), "runs_per_month": 1 + i % 4} for i in range(50)]
        t = time.perf_counter()
        p = http("POST", f"{base}/v1/plan", {"jobs": jobs, "horizon_months": 12})
        plan_s = time.perf_counter() - t
        rss3 = rss_mb(server.pid)
        print(f"server RSS: {rss0:.0f} MB ready, {rss1:.0f} MB after the first quote, {rss2:.0f} MB after 200 "
              f"distinct quotes, {rss3:.0f} MB after a 50-job plan ({plan_s:.1f} s, {p['solver']['status']})")
        # Then models nobody asked before, each estimated anew on every card: the memos fill and
        # let go, so the second 500 must leave the process about where the first did.
        after = []
        for i in range(1, 1001):
            model = {"params_b": round(0.2 + 0.0029 * i, 4), "name": f"footprint-{i}"}
            http("POST", f"{base}/v1/quote", {"workload": {**workload(i), "model": model}})
            if i % 500 == 0:
                after.append(rss_mb(server.pid))
        print(f"server RSS after new models: {after[0]:.0f} MB after 500, {after[1]:.0f} MB after 1,000 "
              f"({after[1] - after[0]:+.0f} MB for the second 500)")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
