"""A served process keeps its threads on one CPU; its solve workers use them all.

A request is handed from thread to thread. The event loop reads it, a pool thread computes the
answer, and the event loop sends it. When the kernel has put those threads on different CPUs,
each hand-over wakes another CPU, and so does every pass of Python's lock between them while a
quote computes. On this repository's 2-vCPU virtual machine the same restricted quote took 1.7 ms
when both threads happened to share a CPU and 3.0-3.9 ms when they did not (``bench/idle_gap.py``);
at 4 clients a quote with a new token count took 34-36 ms unbound and 24-25 ms bound
(``bench/load.py``, 2026-12-02). One process runs Python on one thread at a time anyway, so a served
process now binds all of its threads to one CPU (``GPUCOST_SERVE_CPU_AFFINITY=auto``, the default;
``off`` leaves the kernel to place them):

* each ``gpucost serve`` process (each of ``--workers N``) claims a CPU no other one holds, by
  an exclusive lock on a file per CPU (``<tmp>/gpucost-cpus-<uid>/<cpu>.lock``), held while the
  process lives: N processes get N different CPUs, and one that finds every CPU taken stays
  unbound. It tries the CPU the kernel is running it on first, so servers that cannot see each
  other's lock files (one per container) start apart as the kernel placed them;
* a process allowed a single CPU, or more than ``MOST_CPUS`` (a container sharing a large host:
  the kernel balances it against processes it cannot see), or on a system without
  ``sched_setaffinity``, stays as it is;
* the solve workers (``service.api.workers``) start from a bound thread, so they take back every
  CPU the server was allowed (``release_to``): a plan runs on any CPU but the server's own thread
  keeps its place.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

# Bind only a process allowed at most this many CPUs: a machine or a cpuset of its own.
MOST_CPUS = 8

# The lock file this process holds (open for its life) and the CPUs it was allowed before binding.
_held: IO[bytes] | None = None
_allowed: frozenset[int] | None = None


def lock_dir() -> Path:
    """The folder of this user's served processes' shared files (CPU locks; ``balance``'s loads)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"gpucost-cpus-{uid}"


def _claim(cpus: list[int], folder: Path) -> tuple[int, IO[bytes]] | None:
    """The first of ``cpus`` whose lock file no other process holds, with the file held open."""
    import fcntl

    folder.mkdir(mode=0o700, exist_ok=True)
    for cpu in cpus:
        f = (folder / f"{cpu}.lock").open("ab")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        return cpu, f
    return None


def _current_cpu() -> int | None:
    """The CPU this thread last ran on (``/proc/self/stat``, field 39)."""
    try:
        return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def _in_claim_order(allowed: frozenset[int]) -> list[int]:
    """``allowed`` in order, starting from the CPU this process runs on and wrapping around."""
    cpus = sorted(allowed)
    here = _current_cpu()
    if here in allowed:
        at = cpus.index(here)
        cpus = cpus[at:] + cpus[:at]
    return cpus


def _set_all_threads(cpus: set[int] | frozenset[int]) -> None:
    """Bind every thread of this process to ``cpus`` (threads made later inherit it from theirs)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            continue  # the thread ended meanwhile


def bind_to_one_cpu(mode: str, folder: Path | None = None, most: int = MOST_CPUS) -> int | None:
    """In a served process, at start: bind it to a CPU no other served process holds (``mode``
    ``auto``). The CPU, or None when the process stays unbound (``off``, one CPU allowed or more
    than ``most``, every CPU taken, or a system that cannot bind threads)."""
    global _held, _allowed
    if mode != "auto" or _held is not None or not hasattr(os, "sched_setaffinity"):
        return None
    if not os.path.isdir("/proc/self/task"):
        return None
    allowed = frozenset(os.sched_getaffinity(0))
    if not 2 <= len(allowed) <= most:
        return None
    try:
        got = _claim(_in_claim_order(allowed), folder or lock_dir())
    except OSError as exc:
        logger.warning("serving on every CPU: the CPU lock files cannot be written (%s)", exc)
        return None
    if got is None:
        logger.info("serving on every CPU: other gpucost servers hold each of %s", sorted(allowed))
        return None
    cpu, held = got
    try:
        _set_all_threads({cpu})
    except OSError as exc:
        held.close()
        logger.warning("serving on every CPU: threads cannot be bound here (%s)", exc)
        try:  # the threads bound before the error go back where they were
            _set_all_threads(allowed)
        except OSError:
            pass
        return None
    _held, _allowed = held, allowed
    return cpu


def allowed_before_binding() -> frozenset[int] | None:
    """The CPUs this process was allowed before ``bind_to_one_cpu`` (None: it is not bound)."""
    return _allowed


def allowed_cpus() -> frozenset[int] | None:
    """Every CPU this process may use, bound or not (None: the system cannot tell): what a process
    it starts is given back (``release_to``)."""
    if _allowed is not None:
        return _allowed
    return frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def release_to(cpus: frozenset[int] | None) -> None:
    """Bind every thread of this process to ``cpus`` (a solve worker, given its server's set)."""
    if cpus and hasattr(os, "sched_setaffinity") and os.path.isdir("/proc/self/task"):
        _set_all_threads(cpus)
