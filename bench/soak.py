"""Soak: a real ``gpucost serve`` under steady load while its prices are refreshed every minute.

    .venv/bin/python bench/soak.py [--minutes 10] [--clients 4] [--json]

The server runs on loopback with ``GPUCOST_REFRESH_CRON="* * * * *"`` and ``--log-format json``;
its SkyPilot source reads a folder this script rewrites every 30 s (the reference catalog's
lambda and runpod files, every price moved by up to ±5 %), so each scheduled refresh stores new
prices while the clients' mix (quotes 80 %, offers 15 %, plans 5 %) runs. At the end the script
reads the server's JSON log and ``/v1/prices/status``: every request must have been answered
without a 5xx, each minute must have had its refresh, and no refresh may be left aborted.
Exits 1 when any of that fails. A run that went well removes its folder (catalog, log); a failed
one keeps it and names the log. ``tests/integration/test_soak.py`` runs it for one minute.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import markdown, request, run_level, server, tree_rss_mb  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "reference" / "skypilot-catalog"
CLOUDS = ("lambda", "runpod")


def write_catalog(folder: Path, rng: random.Random) -> None:
    """The reference rows with every price moved by up to ±5 %, written atomically per file."""
    for cloud in CLOUDS:
        text = (REFERENCE / cloud / "vms.csv").read_text(encoding="utf-8")
        reader = csv.DictReader(io.StringIO(text))
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames or [])
        writer.writeheader()
        for row in reader:
            for col in ("Price", "SpotPrice"):
                value = (row.get(col) or "").strip()
                try:
                    row[col] = f"{float(value) * rng.uniform(0.95, 1.05):.4f}" if value else value
                except ValueError:
                    pass
            writer.writerow(row)
        target = folder / cloud / "vms.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(out.getvalue(), encoding="utf-8")
        tmp.replace(target)


def refresh_events(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if doc.get("event") in ("scheduled_refresh", "refresh"):
            events.append(doc)
    return events


def _keys(line: str) -> list[str]:
    """The keys of a JSON log line, or none when it is not a JSON object (a torn or text line)."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        return []
    return sorted(doc) if isinstance(doc, dict) else []


def soak(minutes: float, clients: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="gpucost-soak-"))
    catalog = work / "catalog"
    rng = random.Random(1)
    write_catalog(catalog, rng)
    log = work / "server.jsonl"
    env = {
        "GPUCOST_REFRESH_CRON": "* * * * *", "GPUCOST_SKYPILOT_DIR": str(catalog),
        "GPUCOST_ADMIN_TOKEN": "soak-token",
    }
    stop = threading.Event()

    def rewrite() -> None:
        while not stop.wait(30):
            write_catalog(catalog, rng)

    pids: list[int] = []
    with server(env, ["--log-format", "json"], log_path=log, pids=pids) as base:
        port = int(base.rsplit(":", 1)[1])
        changer = threading.Thread(target=rewrite, daemon=True)
        changer.start()
        seconds = minutes * 60
        slices = []
        # One-minute slices, so the table shows each refresh's minute.
        remaining = seconds
        while remaining > 0:
            slices.append(run_level(port, clients, min(60.0, remaining), distinct=False, seed=len(slices)))
            slices[-1]["server_rss_mb"] = tree_rss_mb(pids[0])
            remaining -= 60.0
        # The last minute's refresh may still be running: give it a bounded moment to finish.
        deadline = time.monotonic() + 90
        want = max(1, int(minutes))
        while time.monotonic() < deadline:
            done = [e for e in refresh_events(log) if e.get("event") == "scheduled_refresh" and "results" in e]
            if len(done) >= want:
                break
            time.sleep(1)
        stop.set()
        status, body = request(port, "GET", "/v1/prices/status")
        prices = json.loads(body) if status == 200 else {}
    events = refresh_events(log)
    scheduled = [e for e in events if e.get("event") == "scheduled_refresh" and "results" in e]
    updated = [e for e in events if e.get("event") == "refresh" and e.get("status") == "updated"
               and e.get("provider") in CLOUDS]
    aborted = [r for r in prices.get("runs", []) if r.get("status") == "aborted"]
    errors = sum(s["errors"] for s in slices)
    ok = status == 200 and errors == 0 and len(scheduled) >= want and not aborted and bool(updated)
    with log.open(encoding="utf-8", errors="replace") as f:
        first = f.readline()  # one line: refresh_events has read the whole log already
    result = {
        "ok": ok, "minutes": minutes, "clients": clients, "slices": slices, "errors": errors,
        "requests": sum(s["requests"] for s in slices),
        "scheduled_refreshes": len(scheduled), "providers_updated": len(updated), "aborted_runs": len(aborted),
        "problems": prices.get("problems", []),
        # What a line of the server's JSON log holds: the first line's keys (none if it is not JSON).
        "log_fields": _keys(first),
        # A run that went well leaves nothing behind; a failed one keeps its folder, the log in it.
        "log": None if ok else str(log),
    }
    if ok:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = soak(args.minutes, args.clients)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"soak: {args.minutes:g} min, {args.clients} clients, refresh every minute; latencies in ms")
        print(markdown(result["slices"]))
        print(f"requests {result['requests']}, errors {result['errors']}, scheduled refreshes "
              f"{result['scheduled_refreshes']}, provider lists updated {result['providers_updated']}, "
              f"aborted runs {result['aborted_runs']}: {'OK' if result['ok'] else 'FAILED'}")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
