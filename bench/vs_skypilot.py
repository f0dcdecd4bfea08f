"""gpucost against SkyPilot's optimizer on the same catalog, timed side by side in one run.

Both read the same SkyPilot catalog folder (``<cloud>/vms.csv``, ``common/accelerators.csv``):
SkyPilot from ``$SKY_RUNTIME_DIR/.sky/catalogs/v8`` (offline: the files carry no md5 record, so it
never downloads), gpucost from a fresh SQLite store filled by ``gpucost prices import --format
skypilot`` of that folder. For each request (GPU, count, clouds, spot):

* SkyPilot: its optimizer (``sky.optimizer.Optimizer.optimize``, minimising cost), in-process in
  SkyPilot's own Python (``bench/skypilot_side.py``), ``--repeats`` calls per request;
* gpucost: the restricted quote (that GPU, at most that count, those clouds, spot as asked, no
  local builds) in-process (``service.answers.quote_answer``, one request repeated in a tight
  loop: a best case) and over HTTP against a real ``gpucost serve`` on loopback, on one kept-alive
  connection; and the unrestricted quote (every provider, GPU and build);
* prices: SkyPilot's pick against gpucost's cheapest offer of that GPU and count on those clouds
  (``GET /v1/offers``), with the reason for every difference. gpucost must never be dearer.

The quotes above repeat one question (the estimates memoised after the first). Distinct
questions, every one new to the server, are timed in the same run: the restricted and the
unrestricted quote with a new token count each time (what a person changes between questions
about one job), the unrestricted quote with a new sequence length each time, and with a new model
each time (a size nobody asked before): the ratios against SkyPilot's optimizer are printed side
by side. ``--distinct-repeats 0`` leaves them out.

On a shared machine the speed of both sides drifts over minutes (a CPU-bound loop timed every few
seconds took 7 ms, then 12 ms, in one run), so the ratios above compare SkyPilot's calls with
gpucost quotes made a minute earlier or later. ``--interleaved N`` (default 32) then times each
distinct series again with the two taken in turn: SkyPilot's optimizer kept running in its own
process (``skypilot_side.py --serve``), one call on the next of the requests above and one
distinct gpucost quote over HTTP, which goes first alternating, N times per series. Each pair
shares the machine's state of the moment; printed are both p50s, their ratio and the median of
the pairs' own ratios.

SkyPilot is installed from PyPI into a throwaway venv unless ``--sky-python`` names one.

Run: .venv/bin/python bench/vs_skypilot.py [--catalog ../shared/reference/skypilot-catalog]
         [--sky-python /tmp/skyvenv/bin/python] [--repeats 5] [--http-repeats 30] [--distinct-repeats 20]
         [--interleaved 32]
"""

from __future__ import annotations

import argparse
import csv
import http.client
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from code_state import describe  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
SKYPILOT_VERSION = "0.14.1"

# (GPU, count, clouds, spot): SkyPilot accelerator names, which are gpucost's canonical names.
REQUESTS: list[tuple[str, int, list[str], bool]] = [
    ("A100", 8, ["aws", "gcp"], False),
    ("A100", 1, ["gcp"], False),
    ("A100-80GB", 8, ["aws", "gcp", "lambda"], False),
    ("H100", 8, ["aws", "gcp", "lambda"], False),
    ("H100", 1, ["gcp", "lambda"], False),
    ("A10G", 1, ["aws"], False),
    ("A10G", 4, ["aws"], False),
    ("L4", 1, ["aws", "gcp"], False),
    ("T4", 1, ["aws", "gcp"], False),
    ("V100", 1, ["aws", "gcp"], False),
    ("A10", 1, ["lambda"], False),
    ("A100", 8, ["aws", "gcp"], True),
    ("A10G", 1, ["aws"], True),
    ("T4", 1, ["aws", "gcp"], True),
    ("H100", 8, ["aws", "gcp"], True),
    ("L4", 1, ["gcp"], True),
]
# A job every GPU above can run, so the quote compares prices rather than rejecting cards.
WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 20_000_000, "seq_len": 512}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


# -- SkyPilot -----------------------------------------------------------------------------------


def sky_python(given: str | None) -> tuple[str, float | None]:
    """A Python with SkyPilot: the one given, or a throwaway venv (seconds it took to install)."""
    if given:
        return given, None
    venv = Path(tempfile.gettempdir()) / "gpucost-bench-skyvenv"
    py = venv / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import sky"], capture_output=True).returncode == 0:
        return str(py), None
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", f"skypilot=={SKYPILOT_VERSION}"], check=True)
    return str(py), time.perf_counter() - t


def sky_env(work: Path) -> dict[str, str]:
    """SkyPilot's environment: its home and runtime folder in ``work``, offline, no usage reports."""
    home = work / "skyhome"
    home.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(home), "SKY_RUNTIME_DIR": str(home), "AWS_EC2_METADATA_DISABLED": "true",
            "NO_GCE_CHECK": "true", "SKYPILOT_DISABLE_USAGE_COLLECTION": "1"}


def run_skypilot(py: str, catalog: Path, requests: list[dict[str, Any]], repeats: int, work: Path) -> dict[str, Any]:
    req_file, out_file = work / "sky_requests.json", work / "sky_answers.json"
    req_file.write_text(json.dumps(requests))
    subprocess.run([py, str(REPO / "bench" / "skypilot_side.py"), str(catalog), str(req_file), str(out_file),
                    str(repeats)], env=sky_env(work), check=True, stdout=subprocess.DEVNULL)
    return json.loads(out_file.read_text())


class SkyOptimizer:
    """SkyPilot's optimizer kept running in its own process (``skypilot_side.py --serve``): one
    call at a time, its seconds as SkyPilot's process timed them."""

    def __init__(self, py: str, catalog: Path, requests: list[dict[str, Any]], work: Path) -> None:
        clouds = ",".join(sorted({c for r in requests for c in r["clouds"]}))
        self.proc = subprocess.Popen(
            [py, str(REPO / "bench" / "skypilot_side.py"), str(catalog), "--serve", clouds], env=sky_env(work),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        ready = self._line()
        if not ready.get("ready"):
            raise RuntimeError(f"skypilot_side.py --serve did not start: {ready}")

    def _line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"skypilot_side.py --serve exited with {self.proc.wait(timeout=30)}")
        return dict(json.loads(line))

    def ask(self, req: dict[str, Any]) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({k: req[k] for k in ("gpu", "count", "clouds", "spot")}) + "\n")
        self.proc.stdin.flush()
        return float(self._line()["seconds"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- gpucost ------------------------------------------------------------------------------------


def gpucost_env(work: Path) -> dict[str, str]:
    # The server's answer cache is off: every timed quote is computed, not replayed.
    return {**os.environ, "GPUCOST_DB_URL": f"sqlite:///{work / 'gpucost.sqlite'}", "XDG_DATA_HOME": str(work),
            "GPUCOST_ANSWER_CACHE": "false", "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}


def gpucost_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("gpucost")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "service.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def quote_body(r: dict[str, Any] | None, workload: dict[str, Any] | None = None) -> dict[str, Any]:
    if r is None:
        return {"workload": workload or WORKLOAD, "top": 5}
    return {"workload": workload or WORKLOAD, "top": 5, "constraints": {
        "gpus": r.get("gpucost_gpus", [r["gpu"]]), "max_gpus": r["count"], "providers": r["clouds"], "allow_spot": r["spot"],
        "include_local": False}}


# Every distinct question gets a number never used before in this process.
_NEW = itertools.count(1)


def new_tokens() -> dict[str, Any]:
    """The bench's job with a token count never asked before (the amount of training only)."""
    return {**WORKLOAD, "tokens": WORKLOAD["tokens"] + 1_000 * next(_NEW)}


def new_seq_len() -> dict[str, Any]:
    """The bench's job with a new sequence length (a new memory and speed model per GPU)."""
    return {**WORKLOAD, "seq_len": 256 + next(_NEW), "tokens": WORKLOAD["tokens"] + 1_000 * next(_NEW)}


def new_model() -> dict[str, Any]:
    """A model nobody asked about before: a new size, its shape derived (``ModelDims``)."""
    k = next(_NEW)
    return {**WORKLOAD, "model": {"params_b": round(0.3 + 0.0007 * k, 4), "name": f"bench-{k}"},
            "tokens": WORKLOAD["tokens"] + 1_000 * k}


def time_http(base: str, body: dict[str, Any] | Callable[[], dict[str, Any]], n: int,
              warm: bool = True) -> tuple[list[float], Any]:
    """``n`` quotes over one kept-alive HTTP/1.1 connection, as a web page or a script's HTTP
    session sends them; each timed from the request's first byte to the parsed answer. ``body``
    a callable: a new body for every quote (distinct questions; its first is not left out)."""
    conn = connect(base)
    make = body if callable(body) else (lambda: body)
    try:
        ans = post_quote(conn, make()) if warm else None  # first call: estimates memoised from here on
        out = []
        for _ in range(n):
            t = time.perf_counter()
            ans = post_quote(conn, make())
            out.append(time.perf_counter() - t)
    finally:
        conn.close()
    return out, ans


def connect(base: str) -> http.client.HTTPConnection:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port), timeout=120)


def post_quote(conn: http.client.HTTPConnection, body: dict[str, Any]) -> Any:
    """``POST /v1/quote`` on ``conn`` (kept alive), the answer parsed."""
    conn.request("POST", "/v1/quote", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    payload = r.read()
    if r.status != 200:
        raise RuntimeError(f"/v1/quote answered {r.status}: {payload[:200]!r}")
    return json.loads(payload)


def time_inprocess(env: dict[str, str], bodies: list[dict[str, Any]], n: int) -> list[list[float]]:
    """Quotes through ``quote_answer`` on the same store, in this process."""
    os.environ.update({k: env[k] for k in ("GPUCOST_DB_URL", "XDG_DATA_HOME")})
    from pricing.store.repository import open_store
    from service.answers import quote_answer
    from service.schemas import QuoteRequest

    store = open_store(env["GPUCOST_DB_URL"])
    out = []
    for body in bodies:
        req = QuoteRequest.model_validate(body)
        quote_answer(req, store)
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            quote_answer(req, store)
            ts.append(time.perf_counter() - t)
        out.append(ts)
    return out


# -- comparison ---------------------------------------------------------------------------------


def sky_rows(catalog: Path, cloud: str, gpu: str, count: int) -> set[str]:
    """Instance types SkyPilot's catalog lists with accelerator ``gpu`` x ``count`` on ``cloud``."""
    path = catalog / cloud / "vms.csv"
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        return {row["InstanceType"] for row in csv.DictReader(f)
                if row.get("AcceleratorName") == gpu and row.get("AcceleratorCount")
                and float(row["AcceleratorCount"]) == count and row.get("InstanceType")}


def same_accelerator(o: dict[str, Any], gpu: str, types: set[str]) -> bool:
    # SkyPilot's name can cover several of gpucost's GPUs (its "H100" is also the slower PCIe card,
    # gpucost's H100-PCIE); GCP accelerators on N1 hosts carry no instance type in SkyPilot's rows.
    return o["gpu"] == gpu or sky_name(o) in types


def sky_name(o: dict[str, Any]) -> str:
    # gpucost names a GCP accelerator on a host "n1-highmem-2+1xT4"; SkyPilot names the host.
    return str(o["instance_type"]).split("+")[0]


def explain(req: dict[str, Any], sky: dict[str, Any], ours: dict[str, Any] | None, ours_by_key: dict[str, Any]) -> str:
    best = sky.get("best")
    if ours is None and best is None:
        return "agree: neither has an offer"
    if ours is None:
        return "DEARER: gpucost has no offer; SkyPilot picks " + f"{best['cloud']}/{best['instance_type']}"
    price = ours["spot_price_hour"] if req["spot"] else ours["price_hour"]
    card = f" ({ours['gpu']})" if ours["gpu"] != req["gpu"] else ""
    ours_label = f"{ours['provider']}/{ours['region']}/{ours['instance_type']}{card} ${price:.4f}/h"
    if best is None:
        return f"gpucost cheaper: SkyPilot finds nothing ({(sky.get('error') or '')[:90]}); gpucost: {ours_label}"
    theirs = float(best["hourly_usd"])
    sky_label = f"{best['cloud']}/{best['region']}/{best['instance_type']} ${theirs:.4f}/h"
    if abs(price - theirs) <= 1e-6 * max(1.0, theirs):
        same = (best["cloud"], best["instance_type"]) == (ours["provider"], sky_name(ours))
        return "agree" + ("" if same else f" on price (tie: SkyPilot {sky_label}, gpucost {ours_label})") + (
            f"; gpucost names the card {ours['gpu']}" if ours["gpu"] != req["gpu"] else "")
    if price > theirs:
        mine = ours_by_key.get(f"{best['cloud']}/{best['region']}/{best['instance_type']}")
        why = ("gpucost's store lacks that instance and region (import dropped it)" if mine is None else
               f"gpucost has it at ${mine:.4f}/h")
        return f"DEARER: SkyPilot {sky_label} vs gpucost {ours_label}: {why}"
    key = f"{ours['provider']}/{ours['region']}/{sky_name(ours)}"
    sky_price = (sky.get("price_check") or {}).get(key)
    if sky_price is not None and abs(sky_price - price) <= 1e-6 * max(1.0, price):
        if ours["provider"] == "gcp" and "+" in str(ours["instance_type"]):
            why = (f"SkyPilot prices gpucost's pick the same (${sky_price:.4f}/h) but its optimizer puts a GCP "
                   "GPU only on its default host shape for that GPU, dearer here than its pick "
                   f"({best['instance_type']}); gpucost tries every host shape the GPU attaches to and takes "
                   f"the cheapest ({ours.get('vcpus'):g} vCPUs, {ours.get('ram_gb'):g} GB)")
        else:
            why = (f"SkyPilot prices gpucost's pick the same (${sky_price:.4f}/h) but does not choose it "
                   "(its default host requirements exclude it)")
    elif sky_price is None:
        why = "SkyPilot cannot launch gpucost's pick for this request (instance/region not in its accelerator mapping)"
    else:
        why = f"SkyPilot prices gpucost's pick at ${sky_price:.4f}/h"
    return f"gpucost cheaper by ${theirs - price:.4f}/h: SkyPilot {sky_label}, gpucost {ours_label}; {why}"


# (series, label, the target: at least this many times SkyPilot's per-request p50)
DISTINCT = [
    ("restricted_tokens", "restricted quote, new tokens each time", 30.0),
    ("open_tokens", "unrestricted quote, new tokens each time", 10.0),
    ("open_seq_len", "unrestricted quote, new seq_len each time", None),
    ("open_model", "unrestricted quote, new model each time", 5.0),
]


def time_distinct(base: str, requests: list[dict[str, Any]], n: int) -> dict[str, list[float]]:
    """Every quote a question the server was never asked: see ``new_tokens`` and the others."""
    if n <= 0:
        return {}
    out: dict[str, list[float]] = {}
    for key, _label, _target in DISTINCT:
        # The restricted series per request in turn; the others are unrestricted (no request).
        targets = requests if key == "restricted_tokens" else [{}]
        out[key] = [t for r in targets
                    for t in time_http(base, lambda key=key, r=r: distinct_body(key, r), n)[0]]  # type: ignore[misc]
    return out


def distinct_body(key: str, r: dict[str, Any]) -> dict[str, Any]:
    """A new question of series ``key`` (``DISTINCT``); the restricted one restricted to ``r``."""
    if key == "restricted_tokens":
        return quote_body(r, new_tokens())
    return quote_body(None, {"open_tokens": new_tokens, "open_seq_len": new_seq_len, "open_model": new_model}[key]())


def timed_quote(conn: http.client.HTTPConnection, body: dict[str, Any]) -> float:
    t = time.perf_counter()
    post_quote(conn, body)
    return time.perf_counter() - t


def time_interleaved(base: str, sky: SkyOptimizer, requests: list[dict[str, Any]],
                     n: int) -> dict[str, list[tuple[float, float]]]:
    """Per distinct series, ``n`` pairs (SkyPilot's seconds, gpucost's seconds): one optimizer call
    on the next request in turn, then one new gpucost question over HTTP; which goes first alternates."""
    for r in requests:  # SkyPilot's first call per request is dropped elsewhere too
        sky.ask(r)
    out: dict[str, list[tuple[float, float]]] = {}
    for key, _label, _target in DISTINCT:
        conn = connect(base)
        try:
            post_quote(conn, distinct_body(key, requests[0]))  # the connection opened, as time_http does
            pairs = []
            for i in range(n):
                r = requests[i % len(requests)]
                body = distinct_body(key, r)
                if i % 2:
                    theirs = sky.ask(r)
                    ours = timed_quote(conn, body)
                else:
                    ours = timed_quote(conn, body)
                    theirs = sky.ask(r)
                pairs.append((theirs, ours))
        finally:
            conn.close()
        out[key] = pairs
    return out


def print_interleaved(pairs: dict[str, list[tuple[float, float]]]) -> None:
    print("\ndistinct questions interleaved with SkyPilot's optimizer (one call each in turn, same requests "
          "in the same order for every series):")
    for key, label, target in DISTINCT:
        ps = pairs[key]
        sky50 = statistics.median(s for s, _ in ps)
        ours50 = statistics.median(g for _, g in ps)
        ratio = sky50 / ours50
        paired = statistics.median(s / g for s, g in ps)
        verdict = "" if target is None else f"  (target >= {target:g}x: {'met' if ratio >= target else 'NOT met'})"
        print(f"  {label:44} n={len(ps):3}  SkyPilot p50 {sky50 * 1e3:6.1f} ms, gpucost p50 {ours50 * 1e3:6.1f} ms"
              f"  -> {ratio:5.1f}x (median of pair ratios {paired:5.1f}x){verdict}")


def print_distinct(d1: dict[str, list[float]], d2: dict[str, list[float]], sky50: float, restricted50: float,
                   open50: float) -> None:
    print(f"\ndistinct questions over HTTP (each quote new to the server), before and after SkyPilot ran; "
          f"SkyPilot p50 {sky50 * 1e3:.0f} ms:")
    print(f"  {'repeated restricted quote (memoised), for comparison':58} p50 {restricted50 * 1e3:7.1f} ms"
          f"  -> {sky50 / restricted50:6.1f}x SkyPilot")
    print(f"  {'repeated unrestricted quote (memoised), for comparison':58} p50 {open50 * 1e3:7.1f} ms"
          f"  -> {sky50 / open50:6.1f}x SkyPilot")
    for key, label, target in DISTINCT:
        xs = d1[key] + d2[key]
        p50 = statistics.median(xs)
        verdict = "" if target is None else f"  (target >= {target:g}x: {'met' if sky50 / p50 >= target else 'NOT met'})"
        print(f"  {label:58} p50 {p50 * 1e3:7.1f} ms, p95 {pct(xs, 0.95) * 1e3:7.1f} ms, n={len(xs):3}"
              f"  -> {sky50 / p50:6.1f}x SkyPilot{verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", type=Path, default=REPO.parent / "shared" / "reference" / "skypilot-catalog")
    ap.add_argument("--sky-python", help="a python with skypilot installed (default: a throwaway venv)")
    ap.add_argument("--repeats", type=int, default=5, help="SkyPilot calls per request")
    ap.add_argument("--http-repeats", type=int, default=30, help="gpucost calls per request")
    ap.add_argument("--distinct-repeats", type=int, default=20,
                    help="distinct quotes per series (restricted: per request); 0: none")
    ap.add_argument("--interleaved", type=int, default=32,
                    help="pairs per distinct series, SkyPilot and gpucost in turn; 0: none")
    args = ap.parse_args()
    py, install_s = sky_python(args.sky_python)
    if install_s is not None:
        print(f"installed skypilot=={SKYPILOT_VERSION} into a throwaway venv in {install_s:.0f} s")
    work = Path(tempfile.mkdtemp(prefix="gpucost-vs-sky-"))
    env = gpucost_env(work)
    print(describe(env))
    t = time.perf_counter()
    subprocess.run([*gpucost_cmd(), "prices", "import", "--format", "skypilot", str(args.catalog), "--json"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    print(f"gpucost store: bundled snapshot + `prices import --format skypilot {args.catalog}` "
          f"({time.perf_counter() - t:.1f} s)")
    port = free_port()
    server = subprocess.Popen([*gpucost_cmd(), "serve", "--port", str(port), "--log-level", "warning"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                fetch("GET", f"{base}/readyz")
                break
            except OSError:
                time.sleep(0.1)
        requests = [{"gpu": g, "count": n, "clouds": c, "spot": s} for g, n, c, s in REQUESTS]
        # gpucost first: its cheapest offers name the instances SkyPilot is asked to price.
        cheapest: list[dict[str, Any] | None] = []
        ours_by_key: dict[str, float] = {}
        for r in requests:
            q = (f"{base}/v1/offers?gpu_count={r['count']}&provider={','.join(r['clouds'])}"
                 f"&spot={'true' if r['spot'] else 'false'}")
            types = set().union(*(sky_rows(args.catalog, c, r["gpu"], r["count"]) for c in r["clouds"]))
            rows = [o for o in fetch("GET", q)["offers"] if same_accelerator(o, r["gpu"], types)]
            r["gpucost_gpus"] = sorted({o["gpu"] for o in rows} | {r["gpu"]})
            cheapest.append(rows[0] if rows else None)
            for o in rows:
                p = o["spot_price_hour"] if r["spot"] else o["price_hour"]
                key = f"{o['provider']}/{o['region']}/{sky_name(o)}"
                ours_by_key[key] = min(p, ours_by_key.get(key, float("inf")))
            if rows:
                r["price_check"] = [{"cloud": rows[0]["provider"], "region": rows[0]["region"],
                                     "instance_type": sky_name(rows[0])}]
        http_restricted = [time_http(base, quote_body(r), args.http_repeats) for r in requests]
        http_open, _ = time_http(base, quote_body(None), args.http_repeats)
        distinct1 = time_distinct(base, requests, args.distinct_repeats)
        sky = run_skypilot(py, args.catalog, requests, args.repeats, work)
        # gpucost once more after SkyPilot, so both sides see the same machine load.
        http_restricted2 = [time_http(base, quote_body(r), args.http_repeats)[0] for r in requests]
        http_open2, _ = time_http(base, quote_body(None), args.http_repeats)
        distinct2 = time_distinct(base, requests, args.distinct_repeats)
        interleaved: dict[str, list[tuple[float, float]]] = {}
        if args.interleaved > 0:
            sky_live = SkyOptimizer(py, args.catalog, requests, work)
            try:
                interleaved = time_interleaved(base, sky_live, requests, args.interleaved)
            finally:
                sky_live.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    inproc = time_inprocess(env, [quote_body(r) for r in requests] + [quote_body(None)], args.http_repeats)

    print(f"SkyPilot {sky['version']} (import {sky['import_s']:.1f} s), {args.repeats} optimizer calls per request "
          f"(first call dropped); gpucost {args.http_repeats} quotes per request after one warm-up")
    print(f"{'request':34} {'sky p50':>9} {'http p50':>9} {'inproc':>8} {'ratio':>7}")
    sky_all, http_all, ratios = [], [], []
    for r, (ts, _ans), ts2, ip, ans in zip(requests, http_restricted, http_restricted2, inproc, sky["answers"],
                                           strict=False):
        sky_ts = ans["seconds"][1:] or ans["seconds"]
        s50, h50, i50 = statistics.median(sky_ts), statistics.median(ts + ts2), statistics.median(ip)
        sky_all += sky_ts
        http_all += ts + ts2
        ratios.append(s50 / h50)
        label = f"{r['count']}x{r['gpu']} {','.join(r['clouds'])}{' spot' if r['spot'] else ''}"
        print(f"{label:34} {s50 * 1e3:7.1f}ms {h50 * 1e3:7.2f}ms {i50 * 1e3:6.2f}ms {s50 / h50:6.0f}x")
    sky50 = statistics.median(sky_all)
    print(f"restricted quote over HTTP: p50 {statistics.median(http_all) * 1e3:.2f} ms, p95 "
          f"{pct(http_all, 0.95) * 1e3:.2f} ms; SkyPilot p50 {sky50 * 1e3:.0f} ms -> "
          f"{sky50 / statistics.median(http_all):.0f}x faster (per-request ratios {min(ratios):.0f}x..{max(ratios):.0f}x)")
    open_all = http_open + http_open2
    print(f"unrestricted quote (every provider, GPU, local build) over HTTP: p50 "
          f"{statistics.median(open_all) * 1e3:.1f} ms, p95 {pct(open_all, 0.95) * 1e3:.1f} ms -> "
          f"{sky50 / statistics.median(open_all):.0f}x faster than SkyPilot's p50; in-process p50 "
          f"{statistics.median(inproc[-1]) * 1e3:.1f} ms")
    if args.distinct_repeats > 0:
        print_distinct(distinct1, distinct2, sky50, statistics.median(http_all), statistics.median(open_all))
    if interleaved:
        print_interleaved(interleaved)
    print("\ncheapest price, SkyPilot's pick vs gpucost's cheapest offer of the same GPU and count:")
    dearer = 0
    for r, ours, ans in zip(requests, cheapest, sky["answers"], strict=True):
        verdict = explain(r, ans, ours, ours_by_key)
        dearer += verdict.startswith("DEARER")
        label = f"{r['count']}x{r['gpu']} {','.join(r['clouds'])}{' spot' if r['spot'] else ''}"
        print(f"  {label:32} {verdict}")
    print(f"gpucost dearer than SkyPilot on {dearer} of {len(requests)} requests")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
