"""Worker processes that end with the server that started them.

Two halves. The server stops its workers itself when it shuts down (``stop_processes``: SIGTERM,
a short wait, then SIGKILL), from the app's lifespan and from ``atexit``. A server that cannot do
that (killed with SIGKILL, crashed) is covered by each worker's own watch: a daemon thread that
sees its parent go (it is re-parented, so ``os.getppid()`` changes) and ends the worker at once.

Linux's ``PR_SET_PDEATHSIG`` is not used: it fires when the *thread* that spawned the child ends,
and a ``ProcessPoolExecutor`` spawns workers from whichever thread submits, here the server's
short-lived worker threads, so it would kill healthy workers whenever such a thread retired.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

# How often a worker looks for its parent: a dead server's workers are gone within this.
WATCH_INTERVAL_S = 0.25
# How long a worker may take to end after SIGTERM before it is killed.
STOP_GRACE_S = 2.0


def _watch(parent: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != parent:
            os._exit(0)  # no cleanup worth waiting for: the work was the dead server's


def end_with_parent(ignore_interrupt: bool = True) -> None:
    """In a worker: end this process as soon as the process that started it is gone.

    A solve worker ignores SIGINT (``ignore_interrupt``); a server process of ``gpucost serve
    --workers N`` keeps uvicorn's own handling of it and only watches its supervisor."""
    if ignore_interrupt:
        # Ctrl-C in a terminal reaches the whole process group: the server handles it and stops its
        # workers; a worker that also took it would die mid-solve with a traceback of its own.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    if parent <= 1:  # already orphaned before we looked
        os._exit(0)
    threading.Thread(target=_watch, args=(parent,), name="gpucost-parent-watch", daemon=True).start()


def stop_processes(processes: Iterable[Any], grace_s: float = STOP_GRACE_S) -> None:
    """Terminate ``multiprocessing.Process`` objects, and kill the ones that do not end in time."""
    live = [p for p in processes if p.is_alive()]
    for p in live:
        try:
            p.terminate()
        except OSError:
            pass  # already gone
    deadline = time.monotonic() + grace_s
    for p in live:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in live:
        if p.is_alive():
            try:
                p.kill()
            except OSError:
                pass
            p.join(1.0)
