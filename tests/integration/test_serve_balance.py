"""``gpucost serve --workers 2``: four kept-alive clients that all landed on one process are spread
over both (``service.api.balance``; ``GPUCOST_SERVE_BALANCE``), and the processes' shared loads
file goes with the server."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from service.api import balance
from tests.integration._live_server import REPO, running_server_process, server_env

_FRESH = itertools.count(1)


def _new_model_quote() -> bytes:
    # A model no earlier request asked about: every quote is computed, none comes from a cache.
    k = next(_FRESH)
    return json.dumps({"workload": {"model": {"params_b": 0.2 + k * 1e-3, "name": f"balance-{k}"},
                                    "tokens": 1e8 + k}}).encode()


def _quote(conn: http.client.HTTPConnection) -> tuple[int, bool]:
    """One quote on ``conn``: its status, and whether the server closed the connection after it."""
    conn.request("POST", "/v1/quote", body=_new_model_quote(), headers={"content-type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    return resp.status, (resp.getheader("connection") or "").lower() == "close"


def _owners(workers: list[psutil.Process], port: int) -> dict[int, int]:
    """The serving process of each client connection to ``port``, by the client's port."""
    out: dict[int, int] = {}
    for p in workers:
        for c in p.net_connections(kind="tcp"):
            if c.laddr and c.raddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED:
                out[c.raddr.port] = p.pid
    return out


def _loads_files(tmp: Path) -> list[Path]:
    return sorted((tmp / f"gpucost-cpus-{os.getuid()}").glob("loads-*"))


def _slot_pids(path: Path) -> set[int]:
    data = path.read_bytes()
    return {balance._SLOT.unpack_from(data, i * balance._SLOT.size)[0] for i in range(balance.SLOTS)} - {0}


def two_server_processes(proc: subprocess.Popen[bytes], tmp: Path, with_loads_file: bool = True) -> list[psutil.Process]:
    """The two processes of ``gpucost serve --workers 2`` (``proc``: its supervisor) once both have
    started (``with_loads_file``: each holds its slot in the loads file the supervisor made in ``tmp``,
    which a process takes once its app is made)."""
    deadline = time.monotonic() + 120
    while True:
        # uvicorn's processes, not multiprocessing's resource tracker beside them
        workers = [c for c in psutil.Process(proc.pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
        files = _loads_files(tmp)
        if len(workers) == 2 and (not with_loads_file or (len(files) == 1 and _slot_pids(files[0]) == {w.pid for w in workers})):
            return workers
        assert time.monotonic() < deadline, "the two server processes did not both start"
        time.sleep(0.2)


def _four_clients_from_one_process(tmp_path: Path, mode: str, within_s: float) -> tuple[list[int], int, int, int]:
    """Four clients whose connections all landed on one of two server processes ask quotes until
    each process holds two or ``within_s`` pass: the split then, the connections the server
    closed, the errors, and the loads files there were while serving."""
    env = {"GPUCOST_SOLVE_PROCESSES": "0", "TMPDIR": str(tmp_path), "GPUCOST_SERVE_BALANCE": mode}
    with running_server_process(f"sqlite:///{tmp_path / 'prices.sqlite'}", tmp_path / "serve.log", timeout_s=120,
                                env=env, args=["--workers", "2"]) as (base, proc):
        port = int(base.rsplit(":", 1)[1])
        workers = two_server_processes(proc, tmp_path, with_loads_file=mode != "off")
        if mode == "off":
            time.sleep(1.0)  # both processes have surely started their apps by now
        files_seen = len(_loads_files(tmp_path))
        conns: list[http.client.HTTPConnection] = []
        try:
            split, closed, errors = _spread(workers, port, conns, within_s)
        finally:
            for c in conns:
                c.close()
    # The supervisor, stopped by SIGTERM, removed the file it made.
    assert _loads_files(tmp_path) == []
    assert proc.returncode in (0, -signal.SIGTERM), (tmp_path / "serve.log").read_text()[-2000:]
    return split, closed, errors, files_seen


def _spread(workers: list[psutil.Process], port: int, conns: list[http.client.HTTPConnection],
            within_s: float) -> tuple[list[int], int, int]:
    # With one process stopped, the other accepts every connection: all four land there.
    busy, idle = workers
    idle.suspend()
    try:
        for _ in range(4):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conns.append(conn)
            assert _quote(conn) == (200, False)
    finally:
        idle.resume()
    owners = _owners(workers, port)
    assert {owners[c.sock.getsockname()[1]] for c in conns} == {busy.pid}

    # Four clients keep asking, each on its own connection (reopened when the server closes it).
    closed, errors = [0], [0]
    stop = threading.Event()

    def client(conn: http.client.HTTPConnection) -> None:
        while not stop.is_set():
            try:
                status, was_closed = _quote(conn)
            except (OSError, http.client.HTTPException):
                errors[0] += 1
                conn.close()
                continue
            errors[0] += status != 200
            closed[0] += was_closed

    threads = [threading.Thread(target=client, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    split: list[int] = []
    try:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            time.sleep(0.5)
            owners = _owners(workers, port)
            mine = [owners[c.sock.getsockname()[1]] for c in conns
                    if c.sock is not None and c.sock.getsockname()[1] in owners]
            split = sorted((mine.count(w.pid) for w in workers), reverse=True)
            if split == [2, 2]:
                break
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    return split, closed[0], errors[0]


def test_clients_that_landed_on_one_process_are_spread_over_both(tmp_path: Path) -> None:
    split, closed, errors, files = _four_clients_from_one_process(tmp_path, "auto", within_s=40)
    assert files == 1
    assert split == [2, 2], f"still {split} after {closed} connections were handed on"
    assert closed >= 2 and errors == 0


def test_off_leaves_every_connection_where_it_landed(tmp_path: Path) -> None:
    split, closed, errors, files = _four_clients_from_one_process(tmp_path, "off", within_s=3)
    assert (split, closed, errors, files) == ([4, 0], 0, 0, 0)


def test_a_bad_value_is_refused_naming_the_variable(tmp_path: Path) -> None:
    env = server_env(f"sqlite:///{tmp_path / 'prices.sqlite'}", GPUCOST_SERVE_BALANCE="always")
    out = subprocess.run([sys.executable, "-c", "from service.cli import main; main()", "serve", "--port", "1",
                          "--workers", "2"], check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "GPUCOST_SERVE_BALANCE" in out.stderr and "Traceback" not in out.stderr
