"""This working tree against an earlier revision, over HTTP, every quote new and the two interleaved.

    .venv/bin/python bench/ab_quotes.py [--base HEAD~1] [--kinds restricted,open,spot,model,full] [--n 200]
        [--base-build] [--skypilot-catalog ../shared/reference/skypilot-catalog] [--pg-url postgresql+psycopg://...]

On a shared machine a figure measured at 19:40 and one measured at 19:50 can differ by half
(``docs/performance-distinct.md``), so comparing a change with the code before it in two runs
measures the machine. This bench runs both at once: ``--base`` is checked out into a temporary
git worktree, each side gets its own ``gpucost serve`` on loopback over its own fresh SQLite store
(with ``--pg-url``, its own new database on that PostgreSQL server), holding the bundled snapshot
or the SkyPilot catalog imported by that side's own code, and the same distinct question goes to
both, one after the other, the order alternating, on kept-alive connections. Kinds: ``restricted`` (8xA100 on aws/gcp, a new token count each), ``open`` (every
provider, GPU and build, a new token count each), ``spot`` (the same with spot allowed: every
group priced on demand and on spot, per reclaim rate), ``model`` (a model size nobody asked before,
LoRA), ``full`` (the same trained in full, 1-3 B: on the smaller cards no recipe fits).

The base's worktree has no compiled modules of its own (``optimizer/native.py``), so it runs as
Python unless ``--base-build`` builds them with the base's own ``scripts/native.py`` first; the
first lines say what code each side ran.

Prints p25 / p50 / mean per side and the working tree's p50 over the base's. Both servers and the
worktree are removed at the end; nothing leaves the loopback interface.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from code_state import describe
from load import HOST, server  # the bench folder's own server helper

WORKLOAD = {"model": "qwen2.5-0.5b", "method": "lora", "tokens": 20_000_000, "seq_len": 512}
RESTRICTED = {"gpus": ["A100"], "max_gpus": 8, "providers": ["aws", "gcp"], "allow_spot": False,
              "include_local": False}


def body(kind: str, i: int, salt: int) -> dict[str, Any]:
    """Question ``i`` of ``kind``: new to both servers (``salt`` keeps runs apart)."""
    w: dict[str, Any] = {**WORKLOAD, "tokens": WORKLOAD["tokens"] + 1_000 * i + salt * 100_000}
    if kind == "model":
        w["model"] = {"params_b": round(0.3 + 0.00007 * i, 5), "name": f"ab-{salt}-{i}"}
    elif kind == "full":
        w["model"] = {"params_b": round(1.0 + 0.0007 * i, 5), "name": f"ab-full-{salt}-{i}"}
        w["method"] = "full"
    out: dict[str, Any] = {"workload": w, "top": 5}
    if kind == "restricted":
        out["constraints"] = RESTRICTED
    elif kind == "spot":
        out["constraints"] = {"allow_spot": True}
    return out


def post(conn: http.client.HTTPConnection, payload: dict[str, Any]) -> float:
    """Seconds from the request's first byte to the parsed answer."""
    t = time.perf_counter()
    conn.request("POST", "/v1/quote", body=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"/v1/quote answered {r.status}: {data[:200]!r}")
    json.loads(data)
    return time.perf_counter() - t


def import_catalog(code: Path, db_url: str, catalog: Path) -> None:
    """The SkyPilot catalog into ``db_url``, imported by the code at ``code``."""
    env = {**os.environ, "GPUCOST_DB_URL": db_url, "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}
    subprocess.run([sys.executable, "-c", "from service.cli import main; main()", "prices", "import", "--format",
                    "skypilot", str(catalog), "--json"], cwd=code, env=env, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the revision to compare with (default: the last commit)")
    ap.add_argument("--kinds", default="restricted,open,model")
    ap.add_argument("--n", type=int, default=200, help="questions per kind (a new model: a quarter of it)")
    ap.add_argument("--skypilot-catalog", type=Path, help="serve this SkyPilot catalog instead of the bundled snapshot")
    ap.add_argument("--base-build", action="store_true",
                    help="build the base's compiled modules with its own scripts/native.py (else it runs as Python)")
    ap.add_argument("--pg-url", help="serve from PostgreSQL: each side gets a new database on this server "
                    "(created and dropped here) instead of a SQLite file")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    for k in kinds:
        if k not in ("restricted", "open", "spot", "model", "full"):
            ap.error(f"--kinds: unknown kind {k!r}")
    rev = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=REPO, check=True, capture_output=True,
                         text=True).stdout.strip()
    if args.pg_url:  # each side's database: new, dropped afterwards (the tests' own helper)
        sys.path.insert(0, str(REPO))
        from tests.integration._pricestore import fresh_pg_database
    work = Path(tempfile.mkdtemp(prefix="gpucost-ab-"))
    tree = work / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if args.base_build:  # what the base delivered where it compiles modules: its own build of its own sources
            if not (tree / "scripts" / "native.py").is_file():
                ap.error(f"--base-build: {rev} has no scripts/native.py")
            subprocess.run([sys.executable, str(tree / "scripts" / "native.py")], cwd=tree, check=True,
                           stdout=subprocess.DEVNULL)
        print(f"this checkout's side: {describe()}")
        print(f"the base's side ({rev}): {describe(root=tree)}")
        with ExitStack() as stack:
            bases = {}
            for name, code in (("base", tree), ("tree", REPO)):
                db_url = (stack.enter_context(fresh_pg_database(args.pg_url)) if args.pg_url
                          else f"sqlite:///{work / (name + '.sqlite')}")
                if args.skypilot_catalog is not None:
                    import_catalog(code, db_url, args.skypilot_catalog.resolve())
                bases[name] = stack.enter_context(server({"GPUCOST_DB_URL": db_url}, cwd=code))
            conns = {n: http.client.HTTPConnection(HOST, int(b.rsplit(":", 1)[1]), timeout=120) for n, b in bases.items()}
            salt = int(time.time()) % 1_000  # up to 1e8 more tokens: a job of ordinary length
            load = os.getloadavg()[0]
            store = "PostgreSQL" if args.pg_url else "SQLite"
            print(f"working tree vs {rev}, interleaved distinct quotes over HTTP, {store} stores, 2-core machine, "
                  f"load {load:.2f}")
            print(f"| kind | n | {rev} p25 / p50 / mean | working tree p25 / p50 / mean | p50 ratio |")
            print("|---|---|---|---|---|")
            for kind in kinds:
                n = max(8, args.n // 4) if kind in ("model", "full") else args.n
                times: dict[str, list[float]] = {"base": [], "tree": []}
                order = ["base", "tree"]
                for i in range(n):
                    q = body(kind, i, salt)
                    for name in order:
                        times[name].append(post(conns[name], q))
                    order.reverse()
                cells = []
                for name in ("base", "tree"):
                    xs = times[name][2:]  # the first questions of a kind warm its memos on both sides
                    q1 = statistics.quantiles(xs, n=4)[0]
                    cells.append(f"{1000 * q1:.2f} / {1000 * statistics.median(xs):.2f} / {1000 * statistics.mean(xs):.2f} ms")
                ratio = statistics.median(times["tree"][2:]) / statistics.median(times["base"][2:])
                print(f"| {kind} | {n} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
