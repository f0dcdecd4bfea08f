"""Benches leave nothing behind: each one run briefly in a temporary folder of its own (``TMPDIR``)
exits 0 and leaves that folder as it found it (``bench/workdir.py``; servers' benches remove their
folder after a run that went well)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# Each bench with arguments that keep it to seconds.
RUNS = {
    "token_sweep": ["--rounds", "1"],
    "store_reads": ["--runs", "20"],
    "http_overhead": ["--runs", "20"],
    "cold_quote_profile": ["--runs", "1", "--profile", "1", "--top", "3"],
    "bench_price_store": [],
    "abuse": ["--burst", "20", "--bursts", "1", "--normal", "2", "--json"],
    "serve_footprint": ["--seconds", "2", "--clients", "1", "--json"],
    "attribute_reads": ["--kinds", "restricted", "--quotes", "1", "--warm", "0"],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_bench_runs_and_removes_its_folder(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(TMPDIR=str(tmp_path), AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    done = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), *RUNS[name]], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip()
    # What stays is only the folder of per-CPU lock files that served processes share (``service.api.affinity``).
    assert {p.name for p in tmp_path.iterdir()} <= {f"gpucost-cpus-{os.getuid()}"}, done.stdout[-2000:]
