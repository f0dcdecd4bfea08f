"""The one-minute soak in CI: a real server on loopback, steady load, a scheduled refresh of new
prices, JSON logs; and the server's start-up refusing a bad cron line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from service.cli import app as cli

REPO = Path(__file__).resolve().parents[2]


def test_one_minute_soak_with_a_refresh_has_no_errors(tmp_path: Path) -> None:
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true", "TMPDIR": str(tmp_path)}
    env = {k: v for k, v in env.items() if not k.startswith("GPUCOST_")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "soak.py"), "--minutes", "1", "--clients", "2", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == 0 and result["requests"] > 0
    # The scheduler's outcome and each provider's refresh reached the server's JSON log.
    assert result["scheduled_refreshes"] >= 1 and result["providers_updated"] >= 1
    assert result["aborted_runs"] == 0 and result["problems"] == []
    assert done.returncode == 0 and result["ok"]
    assert {"ts", "level", "logger", "message", "request_id"} <= set(result["log_fields"])
    # Its folder and the server's are removed. The folder of per-CPU lock files that served processes
    # share (``service.api.affinity``) stays, as it does for every server.
    assert result["log"] is None
    assert {p.name for p in tmp_path.iterdir()} <= {f"gpucost-cpus-{os.getuid()}"}


def test_a_bad_cron_line_stops_serve_naming_the_variable() -> None:
    result = CliRunner().invoke(cli, ["serve"], env={"GPUCOST_REFRESH_CRON": "not a cron"})
    assert result.exit_code == 2
    assert "GPUCOST_REFRESH_CRON" in result.output and "Traceback" not in result.output


def test_a_bad_cron_line_stops_the_app_too() -> None:
    import pytest

    from optimizer.errors import InvalidInput
    from service.api.app import create_app
    from service.settings import Settings

    with pytest.raises(InvalidInput, match="GPUCOST_REFRESH_CRON"):
        create_app(Settings(refresh_cron="61 * * * *"))


def test_the_load_bench_runs_against_a_real_server() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--clients", "1,4", "--seconds", "3", "--json"],
        cwd=REPO, env={**env, "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"},
        capture_output=True, text=True, timeout=400,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    levels = out["levels"]
    assert "estimator modules compiled" in out["code"]
    assert [lv["clients"] for lv in levels] == [1, 4]
    for lv in levels:
        assert lv["errors"] == 0 and lv["quote_n"] > 0 and lv["healthz_n"] > 0
        assert 50 < lv["server_rss_mb"] < 4000  # the server's processes' resident memory (psutil)
        # Where each kept-alive connection landed (one server process here), read halfway through.
        assert lv["clients_per_process"] == [lv["clients"]] and lv["healthz_beside"] == lv["clients"]


def test_the_load_bench_sends_only_quotes_when_asked_and_says_where_they_landed() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--clients", "4", "--seconds", "2", "--mix", "quotes",
         "--distinct", "tokens", "--workers", "2", "--json"],
        cwd=REPO, env={**env, "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"},
        capture_output=True, text=True, timeout=400, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["mix"] == "quotes"
    (level,) = out["levels"]
    assert level["errors"] == 0 and level["quote_n"] > 0 and level["healthz_n"] > 0
    assert level["offers_n"] == 0 and level["plan_n"] == 0
    # Two server processes: each kept-alive connection is found on one of them, the probe's too.
    assert sum(level["clients_per_process"]) == 4 and 1 <= len(level["clients_per_process"]) <= 2
    assert level["healthz_beside"] in level["clients_per_process"] + [0]
    # Connections a busier process handed on (service.api.balance) are counted, not lost.
    assert isinstance(level["reconnects"], int) and level["reconnects"] >= 0
    # Every client's own quote p50, least first.
    p50s = level["client_quote_p50_ms"]
    assert len(p50s) == 4 and p50s == sorted(p50s) and all(v > 0 for v in p50s)


def test_the_load_bench_names_a_mix_it_does_not_know() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--mix", "everything"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2 and "--mix" in done.stderr and "Traceback" not in done.stderr
