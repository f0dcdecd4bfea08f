"""``gpucost serve`` binds its threads to one CPU (``GPUCOST_SERVE_CPU_AFFINITY``, default ``auto``)
and leaves its solve workers every CPU; ``off`` leaves all of them to the kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.integration._live_server import REPO, running_server_process, server_env

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="binding threads needs Linux and at least two allowed CPUs",
)

ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
PLAN = {"jobs": [{"name": "a", "workload": {"model": "gpt2", "tokens": 1e7}, "runs_per_month": 2}],
        "horizon_months": 3}


def _affinities(pid: int) -> list[list[int]]:
    """Every distinct CPU set among the threads of ``pid``."""
    return [list(s) for s in sorted({tuple(sorted(os.sched_getaffinity(t.id))) for t in psutil.Process(pid).threads()})]


def _serve(tmp_path: Path, mode: str | None) -> tuple[list[list[int]], list[list[list[int]]], int]:
    """The server's thread CPU sets, each solve worker's, and a quote's status, under ``mode``."""
    env = {"TMPDIR": str(tmp_path)}  # its own CPU lock files: no other server on this machine counts
    if mode is not None:
        env["GPUCOST_SERVE_CPU_AFFINITY"] = mode
    with running_server_process(f"sqlite:///{tmp_path / 'prices.sqlite'}", tmp_path / "serve.log", env=env) as (
        base, proc
    ):
        req = urllib.request.Request(f"{base}/v1/plan", data=json.dumps(PLAN).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=180) as resp:
            status = resp.status
        server = _affinities(proc.pid)
        workers = [_affinities(p.pid) for p in psutil.Process(proc.pid).children()
                   if "resource_tracker" not in " ".join(p.cmdline())]
    return server, workers, status


def test_the_server_runs_on_one_cpu_and_its_solve_workers_on_all(tmp_path: Path) -> None:
    server, workers, status = _serve(tmp_path, None)
    assert status == 200
    assert len(server) == 1 and len(server[0]) == 1 and server[0][0] in ALLOWED, (
        f"every thread of the server on the one CPU it claimed: {server}")
    assert workers, "the served app starts its solve workers"
    assert all(w == [ALLOWED] for w in workers), workers


def test_off_leaves_every_thread_to_the_kernel(tmp_path: Path) -> None:
    server, workers, status = _serve(tmp_path, "off")
    assert status == 200
    assert server == [ALLOWED]
    assert workers and all(w == [ALLOWED] for w in workers)


def test_a_bad_value_is_refused_naming_the_variable(tmp_path: Path) -> None:
    env = server_env(f"sqlite:///{tmp_path / 'prices.sqlite'}", GPUCOST_SERVE_CPU_AFFINITY="sometimes")
    out = subprocess.run([sys.executable, "-c", "from service.cli import main; main()", "serve", "--port", "1"],
                         check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "GPUCOST_SERVE_CPU_AFFINITY" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_server_that_cannot_start_binds_nothing(tmp_path: Path) -> None:
    """``gpucost serve`` run in a process of its caller's (a CLI runner) that fails as its app is
    made (here a missing price book) leaves that process's threads where they were and claims no CPU."""
    code = (
        "import json, os\n"
        "from typer.testing import CliRunner\n"
        "from service.cli import app\n"
        "result = CliRunner().invoke(app, ['serve', '--port', '1'])\n"
        "print(json.dumps({'code': result.exit_code, 'cpus': sorted(os.sched_getaffinity(0))}))\n"
    )
    env = server_env(f"sqlite:///{tmp_path / 'prices.sqlite'}", GPUCOST_PRICE_BOOK=str(tmp_path / "missing.yaml"),
                     TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         check=False, timeout=180)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"code": 2, "cpus": ALLOWED}, out.stderr[-2000:]
    assert not (tmp_path / f"gpucost-cpus-{os.getuid()}").exists()
