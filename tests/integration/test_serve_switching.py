"""Every served process of ``gpucost serve`` hands Python's lock to its event loop every 0.5 ms
(``service.api.switching``), whether it is the only one or one of ``--workers N`` (which uvicorn
starts afresh, so a setting made in the supervisor would not reach them)."""

from __future__ import annotations

import http.client
import time
from pathlib import Path

import psutil
import pytest

from service.api.switching import SWITCH_INTERVAL_S
from tests.integration._live_server import running_server_process
from tests.integration.test_metrics import _samples
from tests.integration.test_serve_balance import _loads_files, _slot_pids


def _scraped_interval(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        assert resp.status == 200
        return float(_samples(resp.read().decode())["gpucost_switch_interval_seconds"][0][1])
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_each_served_process_switches_every_half_millisecond(tmp_path: Path, workers: int) -> None:
    env = {"GPUCOST_SOLVE_PROCESSES": "0", "TMPDIR": str(tmp_path)}
    with running_server_process(f"sqlite:///{tmp_path / 'prices.sqlite'}", tmp_path / "serve.log", timeout_s=120,
                                env=env, args=["--workers", str(workers)]) as (base, proc):
        port = int(base.rsplit(":", 1)[1])
        if workers == 1:
            assert _scraped_interval(port) == SWITCH_INTERVAL_S
            return
        deadline = time.monotonic() + 120
        while True:
            # uvicorn's processes, not multiprocessing's resource tracker beside them
            procs = [c for c in psutil.Process(proc.pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
            files = _loads_files(tmp_path)
            # Both have made their apps once each holds its slot in the supervisor's loads file.
            if len(procs) == 2 and len(files) == 1 and _slot_pids(files[0]) == {p.pid for p in procs}:
                break
            assert time.monotonic() < deadline, "the two server processes did not both start"
            time.sleep(0.2)
        seen = []
        for other in procs:
            other.suspend()  # the process left running accepts the connection
            try:
                seen.append(_scraped_interval(port))
            finally:
                other.resume()
        assert seen == [SWITCH_INTERVAL_S, SWITCH_INTERVAL_S]
