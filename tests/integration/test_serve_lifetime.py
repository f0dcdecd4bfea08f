"""``gpucost serve`` stopped by SIGTERM or SIGINT leaves no process behind: its solve workers end
with it, and so do they when the server is killed outright."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.integration._live_server import REPO, free_port, server_env

PLAN = {
    "jobs": [{"name": "nightly", "workload": {"model": "gpt2", "tokens": 1e7}, "runs_per_month": 2}],
    "horizon_months": 3,
}


def _start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-c", "from service.cli import main; main()", "serve", "--host", "127.0.0.1",
           "--port", str(port), *args]
    env = server_env(f"sqlite:///{tmp_path / 'prices.sqlite'}", GPUCOST_SOLVE_PROCESSES="2")
    with (tmp_path / "serve.log").open("wb") as log:  # the child keeps its own handle
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return proc, base
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail("gpucost serve did not answer within 120 s")
        time.sleep(0.2)


def _plan(base: str) -> int:
    req = urllib.request.Request(f"{base}/v1/plan", data=json.dumps(PLAN).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=180) as resp:
        return resp.status


def _stopped(proc: subprocess.Popen[bytes], children: list[psutil.Process], timeout_s: float) -> list[int]:
    """Wait for the server and its children; the pids still running after ``timeout_s``."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    _, alive = psutil.wait_procs(children, timeout=5)
    left = [p.pid for p in alive]
    for p in alive:  # leave nothing behind, even when the test fails
        p.kill()
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    return left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_server_and_every_worker(tmp_path: Path, sig: signal.Signals) -> None:
    proc, base = _start(tmp_path)
    try:
        assert _plan(base) == 200
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2, "the plan ran without solve workers"
        # The descriptor table was grown at start (service.api.descriptors), not by a burst.
        assert _fd_size(proc.pid) >= 1024
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    proc.send_signal(sig)
    left = _stopped(proc, children, timeout_s=30)
    assert proc.returncode is not None
    assert left == [], f"worker processes outlived the server: {left}"


def test_workers_end_when_the_server_is_killed_outright(tmp_path: Path) -> None:
    proc, base = _start(tmp_path)
    try:
        assert _plan(base) == 200
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    proc.kill()  # SIGKILL: no lifespan, no atexit; each worker must notice on its own
    left = _stopped(proc, children, timeout_s=10)
    assert left == [], f"worker processes outlived a killed server: {left}"


def _fd_size(pid: int) -> int:
    """The size of a process's descriptor table (``FDSize`` in ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("FDSize:"):
            return int(line.split()[1])
    raise AssertionError("no FDSize")


def _quote(base: str, tokens: float) -> int:
    body = json.dumps({"workload": {"model": "gpt2", "tokens": tokens}}).encode()
    req = urllib.request.Request(f"{base}/v1/quote", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.status


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_serve_with_several_processes_answers_and_leaves_nothing(tmp_path: Path, sig: signal.Signals) -> None:
    """``gpucost serve --workers 2``: two server processes under uvicorn's supervisor, each with its
    solve workers; stopped (SIGTERM) or killed outright (SIGKILL), none of them is left."""
    proc, base = _start(tmp_path, "--workers", "2")
    try:
        assert all(_quote(base, 1e7 + 1_000 * i) == 200 for i in range(4))
        assert _plan(base) == 200
        servers = psutil.Process(proc.pid).children()
        children = psutil.Process(proc.pid).children(recursive=True)
        serving = [p for p in servers if "resource_tracker" not in " ".join(p.cmdline())]
        assert len(serving) == 2, servers
        assert all(_fd_size(p.pid) >= 1024 for p in serving)
        assert len(children) >= 4, "each server process has its solve workers"
    except BaseException:
        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()
        proc.kill()
        proc.wait()
        raise
    proc.send_signal(sig)
    left = _stopped(proc, children, timeout_s=30)
    assert left == [], f"processes outlived gpucost serve --workers 2 ({sig.name}): {left}"
