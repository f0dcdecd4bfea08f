"""The server's file-descriptor table grown once at start, not under the first burst of connections.

Linux keeps a process's open files in a table it doubles when a new descriptor does not fit
(64, 128, 256, ...), and in a process with several threads each doubling waits for an RCU grace
period before the old table can go (``expand_fdtable`` in the kernel's ``fs/file.c``). A served process has threads (quote lanes, the store check,
solve-pool feeders), so the first burst of some hundreds of connections grew the table three or
four times in the middle of ``accept()``; the event loop itself stayed responsive, but those
connections reached the app late: in ``bench/abuse.py`` the first burst's slowest 429 took
215-288 ms in 3 runs of 4 without this and 48-78 ms in 6 runs of 6 with it (2026-12-01), while
later bursts took under 100 ms either way. The table never shrinks, so growing it once at start is
enough. ``/proc/<pid>/status`` shows the size as ``FDSize``.
"""

from __future__ import annotations

import fcntl
import os
import resource

# Descriptors to make room for: a burst of this many connections finds the table grown.
RESERVED = 1024


def reserve(n: int = RESERVED) -> int:
    """Grow this process's descriptor table to hold ``n`` descriptors (within its soft limit).
    Returns the highest descriptor number made room for, or -1 when the limit is too low to try."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    top = min(n, soft if soft != resource.RLIM_INFINITY else n) - 1
    if top < 3:
        return -1
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        if fd >= top:
            return top
        # The lowest free descriptor at or above ``top`` (never one in use, unlike dup2): the kernel
        # grows the table to cover it, and keeps that size after it is closed.
        high = fcntl.fcntl(fd, fcntl.F_DUPFD, top)
        os.close(high)
    finally:
        os.close(fd)
    return top
