"""Kept-alive connections moved off a server process that holds more of the work than another.

With ``gpucost serve --workers N`` every process accepts on the same socket: the kernel hands a new
connection to whichever process accepts first, and a kept-alive connection stays where it landed.
Four clients of two processes landed 2+2, 3+1 or 4+0 (``bench/load.py``'s ``split``, 2026-12-05);
with 3+1 three clients shared one CPU while the other served one, and their quotes waited three
times as long.

Each process publishes, in its slot of a small file the supervisor made (``shared_file``, named
by ``GPUCOST_SERVE_LOADS`` in its processes' environment), how many requests it has had in flight
on average over the last ``TAU_S`` (time-weighted, decayed to the moment a reader looks). A process
that holds more than ``IMBALANCE`` requests more than the least busy live one answers the response
it is sending with ``Connection: close``; the client opens a new connection, and the idler process,
whose event loop is free, usually accepts it first. Moving one closed-loop client changes the
difference by two, hence a threshold above one (at one, a 3+2 split would swing back and forth).
After a close a process waits ``HOLD_S`` for the averages to follow before it closes another, so
it moves at most one connection in that time, and a busy process looks at the others at most every
``CHECK_S``. A process serving alone, or with no file, never closes a connection.
"""

from __future__ import annotations

import atexit
import math
import mmap
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "GPUCOST_SERVE_LOADS"
SLOTS = 64  # gpucost serve --workers takes at most 64
# Per slot: the process id (0: free), the mean in flight, when it was last updated
# (time.monotonic, one clock for every process of the machine), and the count in flight then.
_SLOT = struct.Struct("=qddd")
TAU_S = 0.25
HOLD_S = 2 * TAU_S
IMBALANCE = 1.5
# A busy process reads its siblings' slots at most this often (the averages move over TAU_S), so
# a response costs a clock read and a comparison, not a scan of the file.
CHECK_S = 0.05


@contextmanager
def shared_file(workers: int, folder: Path | None = None) -> Iterator[Path | None]:
    """In the supervisor of ``workers`` processes: the file their loads go in, named in the
    environment they inherit, removed when serving ends. None (and nothing made) for one process
    or on Windows."""
    if workers < 2 or sys.platform == "win32":  # flock is POSIX: Windows serves unbalanced
        os.environ.pop(ENV, None)  # a lone process joins no other server's file
        yield None
        return
    from service.api.affinity import lock_dir

    folder = folder or lock_dir()
    folder.mkdir(mode=0o700, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="loads-", dir=folder)
    path = Path(name)
    try:
        os.write(fd, bytes(_SLOT.size * SLOTS))
        os.close(fd)
        os.environ[ENV] = name
        yield path
    finally:
        os.environ.pop(ENV, None)
        path.unlink(missing_ok=True)


_PROC = Path("/proc/self/stat").exists()


def _decayed(mean: float, in_flight: float, at: float, now: float) -> float:
    """The time-weighted average in flight as of ``now``, from the one taken ``at`` (``mean``), the
    count having stayed ``in_flight`` since: exact for a count that changes only by events."""
    return in_flight + (mean - in_flight) * math.exp(min(0.0, at - now) / TAU_S)


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running sibling of this process (a process of the same supervisor):
    one that is gone, a zombie not yet reaped, or an unrelated process that got a dead one's pid
    holds no slot."""
    if not _PROC:  # no /proc: whether the pid exists is all that can be told
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    return state != "Z" and int(ppid) == os.getppid()


class ProcessLoads:
    """This process's requests in flight, published beside its siblings'; when to close."""

    def __init__(self, path: Path | str, clock: Callable[[], float] = time.monotonic) -> None:
        import fcntl

        self.clock = clock
        self.pid = os.getpid()
        self._file = open(path, "r+b")  # noqa: SIM115 - held for the process's life
        try:
            self._map = mmap.mmap(self._file.fileno(), _SLOT.size * SLOTS)
        except (OSError, ValueError):
            self._file.close()
            raise
        self.in_flight = 0
        self.mean = 0.0
        self.at = clock()
        self.closed_at = -math.inf
        self.checked_at = -math.inf
        # Claimed under the file's lock, so two processes starting together take different slots;
        # a slot whose process is gone (killed, restarted by the supervisor) is free again.
        fcntl.flock(self._file, fcntl.LOCK_EX)
        try:
            for slot in range(SLOTS):
                owner = _SLOT.unpack_from(self._map, slot * _SLOT.size)[0]
                if owner == 0 or not _alive(owner):
                    break
            else:
                self._map.close()
                self._file.close()
                raise OSError(f"every one of {SLOTS} load slots is held")
            self.slot = slot
            self._publish()
        finally:
            if not self._file.closed:
                fcntl.flock(self._file, fcntl.LOCK_UN)

    @classmethod
    def from_environment(cls) -> ProcessLoads | None:
        """One of ``gpucost serve --workers N``'s processes joins its siblings; None otherwise."""
        name = os.environ.get(ENV)
        if not name:
            return None
        try:
            loads = cls(name)
        except (OSError, ValueError):  # gone, unreadable, or shorter than its slots
            return None  # serving goes on, unbalanced
        atexit.register(loads.close)
        return loads

    def _publish(self) -> None:
        _SLOT.pack_into(self._map, self.slot * _SLOT.size, self.pid, self.mean, self.at, float(self.in_flight))

    def _move(self, step: int) -> None:
        now = self.clock()
        self.mean = _decayed(self.mean, self.in_flight, self.at, now)
        self.at = now
        self.in_flight += step
        self._publish()

    def started(self) -> None:
        self._move(1)

    def ended(self) -> None:
        self._move(-1)

    def load(self, now: float | None = None) -> float:
        """This process's average in flight, as of ``now``."""
        return _decayed(self.mean, self.in_flight, self.at, self.clock() if now is None else now)

    def least_other(self, now: float) -> float | None:
        """The least average in flight among the other live processes, as of ``now``."""
        least: float | None = None
        for slot in range(SLOTS):
            if slot == self.slot:
                continue
            pid, mean, at, in_flight = _SLOT.unpack_from(self._map, slot * _SLOT.size)
            if pid == 0:
                continue
            value = _decayed(mean, in_flight, at, now)
            if (least is None or value < least) and _alive(pid):
                least = value
        return least

    def should_close(self) -> bool:
        """Whether the response being sent should end its connection. A yes starts the hold."""
        now = self.clock()
        if now - self.closed_at < HOLD_S or now - self.checked_at < CHECK_S:
            return False
        mine = self.load(now)
        if mine <= IMBALANCE:
            return False  # no other process can be that much idler
        self.checked_at = now
        least = self.least_other(now)
        if least is None or mine - least <= IMBALANCE:
            return False
        self.closed_at = now
        return True

    def close(self) -> None:
        """Give the slot back (a process that dies without this is found dead by its pid)."""
        if self._map.closed:
            return
        _SLOT.pack_into(self._map, self.slot * _SLOT.size, 0, 0.0, 0.0, 0.0)
        self._map.close()
        self._file.close()
