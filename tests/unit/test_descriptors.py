"""``service.api.descriptors.reserve``: the descriptor table is grown at once (``FDSize`` in
``/proc/<pid>/status``), without touching a descriptor in use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")


def _fd_size(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("FDSize:"):
            return int(line.split()[1])
    raise AssertionError("no FDSize in /proc status")


def test_reserve_grows_the_table_once_and_closes_what_it_opened() -> None:
    code = (
        "import os, sys\n"
        "from service.api import descriptors\n"
        "def size():\n"
        "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('FDSize:'))\n"
        "before = size(); opened = len(os.listdir('/proc/self/fd'))\n"
        "top = descriptors.reserve(1024)\n"
        "print(before, size(), top, len(os.listdir('/proc/self/fd')) - opened)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    before, after, top, extra = (int(v) for v in out.stdout.split())
    assert before < 1024 <= after
    assert top == 1023
    assert extra == 0  # nothing left open


def test_a_descriptor_in_use_at_the_top_is_left_alone(tmp_path: Path) -> None:
    import fcntl
    import os

    from service.api import descriptors

    kept = tmp_path / "kept"
    kept.write_text("x")
    fd = os.open(kept, os.O_RDONLY)
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 511)  # something already lives at (or just above) 511
    try:
        descriptors.reserve(high + 1)
        assert os.read(high, 1) == b"x"  # still the same open file
        assert _fd_size() >= high + 1
    finally:
        os.close(high)
        os.close(fd)
