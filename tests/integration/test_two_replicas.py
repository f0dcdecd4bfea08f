"""Two real ``gpucost serve`` processes on one real PostgreSQL, configured as a team deploys them.

Shown over HTTP, the CLI and PostgreSQL's own views only: both replicas answer quotes from the
same prices; a refresh made through one is what the other serves (as soon as the store's change
notice reaches it, ``pricing.store.change_notices``); a cron refresh configured on
both runs once; a replica killed with SIGKILL inside its refresh transaction leaves the other
serving the same complete prices.

Two points of a refresh are made observable without touching the code under test:
- the local-builds source reads ``GPUCOST_PARTS_FILE``, here a FIFO: a source that opens it blocks
  until the test writes the file, so the test sees *that* a refresh is under way (a reader on the
  FIFO) and *how many* run (how many readers), and decides when each may go on;
- a ``SHARE`` lock taken by the test on every table of the store lets readers through but holds any
  write, so the killed replica is caught inside its write transaction (``pg_stat_activity`` shows
  its backend waiting on the lock).

Prices are the bundled ones; a changed list is the bundled AutoDL file or parts file with every
price multiplied by a stated factor.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.integration._pricestore import fresh_pg_database
from tests.integration._replicas import (
    Replica,
    bundled_parts_text,
    feed_fifo,
    gpucost_command,
    newest_bundled_autodl,
    open_fifo_writer,
    replicas,
    scaled_csv,
    server_env,
    wait_until,
)

pytestmark = pytest.mark.postgres

QUOTE = {
    "workload": {"model": "qwen2.5-0.5b", "method": "lora", "seq_len": 512, "tokens": 20_000_000},
    "top": 5,
}
AUTODL_FACTOR = 1.25
PARTS_FACTOR = 1.1


# How long a replica may take to hear of another's commit (milliseconds here; bounded for slow CI).
NOTICE_S = 10.0


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, f"{response.request.url}: {response.status_code} {response.text[:500]}"
    return response.json()


def _status(replica: Replica) -> dict[str, tuple[Any, ...]]:
    """provider -> (rows, snapshot id, as_of): what the replica says it serves."""
    body = _ok(replica.get("/v1/prices/status"))
    return {p["provider"]: (p["rows"], p.get("snapshot_id"), p["as_of"]) for p in body["providers"]}


def _offers(replica: Replica, providers: set[str] | None = None) -> dict[tuple[Any, ...], dict[str, Any]]:
    params = {"provider": ",".join(sorted(providers))} if providers else {}
    offers = _ok(replica.get("/v1/offers", params=params))["offers"]
    keyed = {(o["provider"], o["region"], o["zone"], o["instance_type"], o["gpu_count"]): o for o in offers}
    assert len(keyed) == len(offers), "offers repeat a key"
    return keyed


def _quote(replica: Replica) -> dict[str, Any]:
    body = _ok(replica.post("/v1/quote", json=QUOTE))
    assert body["best"] is not None, body["rejected"]
    return {"best": body["best"], "options": body["options"], "snapshot_id": body["snapshot_id"]}


def _view(replica: Replica) -> dict[str, Any]:
    """Everything a caller can see of the prices: status, every offer, a quote."""
    return {"status": _status(replica), "offers": _offers(replica), "quote": _quote(replica)}


def _providers_in(csv_text: str) -> set[str]:
    return {line.split(",", 1)[0] for line in csv_text.splitlines()[1:] if line.strip()}


def test_two_replicas_share_prices_and_survive_a_kill_mid_refresh(pg_url: str, tmp_path: Path) -> None:
    bundled = newest_bundled_autodl()
    autodl_dir = tmp_path / "autodl"
    autodl_dir.mkdir()
    (autodl_dir / bundled.name).write_text(bundled.read_text(encoding="utf-8"), encoding="utf-8")
    autodl_providers = _providers_in(bundled.read_text(encoding="utf-8"))
    parts_fifo = tmp_path / "parts.csv"
    os.mkfifo(parts_fifo)

    with fresh_pg_database(pg_url) as db_url:
        env = server_env(
            tmp_path, db_url, {"GPUCOST_AUTODL_DIR": str(autodl_dir), "GPUCOST_PARTS_FILE": str(parts_fifo)}
        )
        with replicas(tmp_path, [env, env]) as (a, b):
            # First use of the empty database by both at once: they race to migrate and seed it.
            with ThreadPoolExecutor(2) as pool:
                first = list(pool.map(_status, (a, b)))
            assert first[0] == first[1]
            assert {"aws", "gcp", "autodl"} <= set(first[0])
            for replica in (a, b):
                assert _ok(replica.get("/readyz"))["status"] == "ready"

            # Both serve the same quote from the same prices.
            quote_a, quote_b = _quote(a), _quote(b)
            assert quote_a == quote_b

            # A refresh through one replica is what the other serves.
            _ok(b.refresh(["autodl"]))
            before = _offers(b, autodl_providers)
            assert before and {k[0] for k in before} == autodl_providers
            (autodl_dir / bundled.name).write_text(
                scaled_csv(bundled.read_text(encoding="utf-8"), "price_per_gpu_hour", AUTODL_FACTOR),
                encoding="utf-8",
            )
            results = _ok(a.refresh(["autodl"]))["results"]
            assert {r["provider"] for r in results if r["status"] == "updated"} == autodl_providers, results
            # A serves its refresh at once (its own commit); B once the store's change notice reaches
            # it (``pricing.store.change_notices``: well under a millisecond on loopback when idle).
            after_a = _offers(a, autodl_providers)
            deadline = time.monotonic() + NOTICE_S
            while (after_b := _offers(b, autodl_providers)) != after_a and time.monotonic() < deadline:
                time.sleep(0.01)
            assert after_b == after_a
            assert after_b.keys() == before.keys()
            for key, offer in after_b.items():
                assert offer["price_hour_native"] == pytest.approx(
                    before[key]["price_hour_native"] * AUTODL_FACTOR, rel=1e-4
                ), key
                assert offer["price_hour"] == pytest.approx(before[key]["price_hour"] * AUTODL_FACTOR, rel=1e-3)
            assert _status(a) == _status(b)
            assert _quote(b)["snapshot_id"] == _quote(a)["snapshot_id"] != quote_a["snapshot_id"]

            # Kill A inside the write transaction of a refresh; B keeps serving the same prices.
            seen_before = _view(b)
            _kill_inside_refresh(a, b, db_url, parts_fifo, seen_before)
            assert _view(b) == seen_before
            assert _ok(b.get("/readyz"))["status"] == "ready"

            # The dead replica's lease lapses: B's next refresh is admitted within a minute.
            deadline = time.monotonic() + 60
            while (response := b.refresh(["autodl"])).status_code == 409 and time.monotonic() < deadline:
                time.sleep(1)
            results = _ok(response)["results"]
            assert all(r["status"] == "unchanged" for r in results), results


def _kill_inside_refresh(
    a: Replica, b: Replica, db_url: str, parts_fifo: Path, seen_before: dict[str, Any]
) -> None:
    engine = create_engine(db_url)
    try:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(a.refresh, ["local"], 120.0)
            # Keep the write end once a reader appears: closing it unwritten would hand the reader
            # an empty file.
            ends: list[int] = []
            wait_until(lambda: _take_writer(parts_fifo, ends), 60, "replica A to read the parts file")
            (fd,) = ends
            with engine.connect() as locker:
                tx = locker.begin()
                own_pid = locker.execute(text("SELECT pg_backend_pid()")).scalar_one()
                tables = locker.execute(
                    text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
                ).scalars().all()
                assert tables
                quoted = ", ".join('"' + t.replace('"', '""') + '"' for t in tables)
                # SHARE: every reader goes on, every writer waits.
                locker.execute(text(f"LOCK TABLE {quoted} IN SHARE MODE"))
                feed_fifo(fd, scaled_csv(bundled_parts_text(), "price", PARTS_FACTOR))
                # A write of prices waiting on the lock (not the lease heartbeat, which waits too).
                wait_until(
                    lambda: _backends(engine, own_pid, "wait_event_type = 'Lock' AND query NOT ILIKE '%leases%'") > 0,
                    60, "replica A's refresh to wait on the lock inside its write",
                )
                # B answers, and stays ready, while A is stuck half-way through its write.
                assert _view(b) == seen_before
                assert b.get("/readyz").status_code == 200
                os.kill(a.proc.pid, signal.SIGKILL)
                a.proc.wait(timeout=10)
                tx.rollback()
            # A's backend sees its client gone once it gets the lock, and rolls back.
            wait_until(
                lambda: _backends(engine, -1, "state IN ('active', 'idle in transaction', "
                                              "'idle in transaction (aborted)') AND pid <> pg_backend_pid()") == 0,
                30, "the killed replica's transaction to end",
            )
            try:
                response = pending.result(timeout=30)
            except httpx.TransportError:
                response = None
            assert response is None or response.status_code != 200, "the refresh finished before the kill"
    finally:
        engine.dispose()


def _take_writer(path: Path, ends: list[int]) -> bool:
    fd = open_fifo_writer(path)
    if fd is not None:
        ends.append(fd)
    return fd is not None


def _backends(engine: Any, own_pid: int, condition: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    f"AND pid <> :own AND {condition}"
                ),
                {"own": own_pid},
            ).scalar_one()
        )


def _cli_status(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = subprocess.run(
        [*gpucost_command(), "prices", "status", "--json"], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )
    assert out.returncode in (0, 1), out.stderr
    return {p["provider"]: p for p in json.loads(out.stdout)["providers"]}


def _next_minute(after: datetime) -> datetime:
    return (after + timedelta(minutes=1)).replace(second=0, microsecond=0)


def test_cron_refresh_on_both_replicas_runs_once(pg_url: str, tmp_path: Path) -> None:
    # One FIFO per replica, so that two runs at once show as two readers, and the test knows whose.
    fifos = [tmp_path / "parts-0.csv", tmp_path / "parts-1.csv"]
    for fifo in fifos:
        os.mkfifo(fifo)
    parts = bundled_parts_text()

    with fresh_pg_database(pg_url) as db_url:
        env = server_env(tmp_path, db_url, {"GPUCOST_REFRESH_CRON": "* * * * *"})
        envs = [{**env, "GPUCOST_PARTS_FILE": str(fifo)} for fifo in fifos]
        with replicas(tmp_path, envs) as (a, b):
            _status(a), _status(b)
            # The first minute that starts after both schedulers run (with a second to spare).
            boundary = _next_minute(datetime.now(UTC) + timedelta(seconds=1))
            # A minute that passed while only one replica was up may have started a run: let it end.
            while datetime.now(UTC) < boundary - timedelta(seconds=0.5):
                for fifo in fifos:
                    fd = open_fifo_writer(fifo)
                    if fd is not None:
                        feed_fifo(fd, parts)
                time.sleep(0.05)

            runs = [0, 0]
            first_seen: datetime | None = None
            watch_until = boundary + timedelta(seconds=60)
            while datetime.now(UTC) < watch_until:
                for i, fifo in enumerate(fifos):
                    fd = open_fifo_writer(fifo)
                    if fd is None:
                        continue
                    runs[i] += 1
                    first_seen = first_seen or datetime.now(UTC)
                    # Hold this run inside its lease a while: the other replica's job, fired at
                    # the same second, must find the lease taken and skip.
                    time.sleep(3)
                    feed_fifo(fd, parts)
                    watch_until = min(watch_until, datetime.now(UTC) + timedelta(seconds=10))
                time.sleep(0.05)
            assert a.alive() and b.alive(), a.log() + b.log()
            assert first_seen is not None, "no scheduled refresh ran:\n" + a.log() + b.log()
            assert sorted(runs) == [0, 1], f"scheduled refreshes per replica in one minute: {runs}"

            wait_until(
                lambda: (_cli_status(env).get("local", {}).get("last_attempt") or "")
                >= boundary.strftime("%Y-%m-%dT%H:%M:%S"),
                30, "the scheduled refresh to record its attempt", step_s=0.5,
            )
