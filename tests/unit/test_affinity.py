"""``service.api.affinity``: a served process claims a CPU no other one holds and binds every thread
to it. Each case runs in a child process, so this test process is never bound."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="binding threads needs Linux and at least two allowed CPUs",
)

# A child that starts a thread, binds (or not), starts another, and prints what it got.
CHILD = textwrap.dedent("""
    import json, os, sys, threading, time
    from pathlib import Path
    from service.api import affinity
    stop = threading.Event()
    before = threading.Thread(target=stop.wait)
    before.start()
    cpu = affinity.bind_to_one_cpu(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
    after = threading.Thread(target=stop.wait)
    after.start()
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    print(json.dumps({
        "cpu": cpu,
        "threads": len(tids),
        "affinities": sorted({tuple(sorted(os.sched_getaffinity(t))) for t in tids}),
        "allowed_before": sorted(affinity.allowed_before_binding() or []),
    }), flush=True)
    if len(sys.argv) > 4:  # hold the CPU until told to end
        sys.stdin.readline()
    stop.set()
""")


def _child(mode: str, folder: Path, hold: bool = False, most: int = 8) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", CHILD, mode, str(folder), str(most)] + (["hold"] if hold else [])
    return subprocess.Popen(args, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _report(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    return dict(json.loads(proc.stdout.readline()))


def _end(proc: subprocess.Popen[str]) -> None:
    proc.communicate(timeout=30)  # end of input: a holding child ends and lets its CPU go
    assert proc.returncode == 0


ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def test_every_thread_is_bound_to_the_cpu_it_claimed(tmp_path: Path) -> None:
    child = _child("auto", tmp_path)
    got = _report(child)
    _end(child)
    assert got["cpu"] in ALLOWED
    # The thread started before binding, the main thread and the one started after: all on it.
    assert got["threads"] == 3
    assert got["affinities"] == [[got["cpu"]]]
    assert got["allowed_before"] == ALLOWED
    assert [p.name for p in tmp_path.iterdir()] == [f"{got['cpu']}.lock"]


def _with_cpus_held(cpus: list[int], folder: Path) -> dict[str, object]:
    """A child's report while this process holds the lock files of ``cpus``, as other servers would."""
    held = []
    try:
        for cpu in cpus:
            f = (folder / f"{cpu}.lock").open("ab")
            held.append(f)
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        child = _child("auto", folder)
        got = _report(child)
        _end(child)
    finally:
        for f in held:
            f.close()
    return got


def test_a_taken_cpu_is_passed_over(tmp_path: Path) -> None:
    got = _with_cpus_held(ALLOWED[1:], tmp_path)  # every CPU but the first
    assert got["cpu"] == ALLOWED[0]


def test_two_servers_get_two_cpus_and_a_cpu_comes_back_when_its_server_ends(tmp_path: Path) -> None:
    first = _child("auto", tmp_path, hold=True)
    second = _child("auto", tmp_path, hold=True)
    try:
        a, b = _report(first), _report(second)
        assert a["cpu"] in ALLOWED and b["cpu"] in ALLOWED and a["cpu"] != b["cpu"]
        if len(ALLOWED) == 2:  # both CPUs held: a third server stays unbound
            extra = _child("auto", tmp_path)
            assert _report(extra)["cpu"] is None
            _end(extra)
    finally:
        _end(first)
        _end(second)
    third = _child("auto", tmp_path)
    assert _report(third)["cpu"] in ALLOWED  # the locks went with the processes that held them
    _end(third)


def test_a_server_that_finds_every_cpu_taken_stays_unbound(tmp_path: Path) -> None:
    got = _with_cpus_held(ALLOWED, tmp_path)
    assert got["cpu"] is None
    assert got["affinities"] == [ALLOWED]
    assert got["allowed_before"] == []


@pytest.mark.parametrize(("mode", "most"), [("off", 8), ("auto", 1)], ids=["off", "more CPUs than most"])
def test_the_kernel_places_the_threads_when_off_or_on_a_larger_machine(tmp_path: Path, mode: str, most: int) -> None:
    child = _child(mode, tmp_path, most=most)
    got = _report(child)
    _end(child)
    assert got["cpu"] is None
    assert got["affinities"] == [ALLOWED]
    assert not list(tmp_path.iterdir())  # no CPU was claimed


def test_a_solve_worker_takes_back_every_cpu(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import json, os, sys
        from pathlib import Path
        from service.api import affinity
        affinity.bind_to_one_cpu("auto", Path(sys.argv[1]))
        bound = sorted(os.sched_getaffinity(0))
        affinity.release_to(affinity.allowed_before_binding())
        print(json.dumps([bound, sorted(os.sched_getaffinity(0))]))
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         check=True, timeout=60)
    bound, released = json.loads(out.stdout)
    assert len(bound) == 1 and bound[0] in ALLOWED
    assert released == ALLOWED
