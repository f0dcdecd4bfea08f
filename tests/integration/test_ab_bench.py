"""``bench/ab_quotes.py`` runs end to end: it serves an earlier revision and this tree side by side,
prints one row per kind, and leaves no git worktree and no server behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _worktrees() -> list[str]:
    out = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def _orphaned_servers() -> set[str]:
    """``gpucost serve`` processes whose parent is gone: what a bench that failed to stop its
    servers leaves (other tests' live servers, running meanwhile under xdist, have their parent)."""
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if line.split()[1] == "1" and "from service.cli import main" in line and " serve " in line}


def test_the_ab_bench_compares_two_revisions_and_cleans_up() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("needs the repository's git history")
    before_trees, before_orphans = _worktrees(), _orphaned_servers()
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}
    r = subprocess.run([sys.executable, str(REPO / "bench" / "ab_quotes.py"), "--base", "HEAD", "--n", "6",
                        "--kinds", "restricted,open,spot,full"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = re.findall(r"^\| (restricted|open|spot|full) \| (?:6|8) \| .* ms \| .* ms \| (\d+\.\d\d) \|$", r.stdout,
                      re.MULTILINE)
    assert [k for k, _ in rows] == ["restricted", "open", "spot", "full"], r.stdout
    assert all(float(ratio) > 0 for _, ratio in rows)
    assert re.search(r"^this checkout's side: code measured: \d+ of \d+ estimator modules compiled", r.stdout, re.MULTILINE)
    assert re.search(r"^the base's side \(\w+\): code measured: \d+ of \d+ estimator", r.stdout, re.MULTILINE)
    assert _worktrees() == before_trees
    assert _orphaned_servers() <= before_orphans


def test_an_unknown_kind_is_refused_naming_the_flag() -> None:
    r = subprocess.run([sys.executable, str(REPO / "bench" / "ab_quotes.py"), "--kinds", "restricted,fast"],
                       cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "--kinds" in r.stderr and "fast" in r.stderr
