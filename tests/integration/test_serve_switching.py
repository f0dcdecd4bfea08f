"""Every served process of ``gpucost serve`` hands Python's lock to its event loop every 0.5 ms
(``service.api.switching``), whether it is the only one or one of ``--workers N`` (which uvicorn
starts afresh, so a setting made in the supervisor would not reach them)."""

from __future__ import annotations

import http.client
from pathlib import Path

import pytest

from service.api.switching import SWITCH_INTERVAL_S
from tests.integration._live_server import running_server_process
from tests.integration.test_metrics import _samples
from tests.integration.test_serve_balance import two_server_processes


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
        seen = []
        for other in two_server_processes(proc, tmp_path):
            other.suspend()  # the process left running accepts the connection
            try:
                seen.append(_scraped_interval(port))
            finally:
                other.resume()
        assert seen == [SWITCH_INTERVAL_S, SWITCH_INTERVAL_S]
