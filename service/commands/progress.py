"""A one-line progress report on stderr for commands that compute for a while (``plan``).

Only when stderr is a terminal: piped or captured, stderr stays free of carriage returns, and
``--json`` output on stdout is never touched. The line says what is being done and for how long,
rewritten in place twice a second, and is erased when the work ends.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

TICK_S = 0.5


@contextmanager
def progress_line(text: str, stream: TextIO | None = None) -> Iterator[None]:
    out = stream or sys.stderr
    if not out.isatty():
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while True:
            out.write(f"\r{text} {time.monotonic() - started:.0f} s ")
            out.flush()
            if done.wait(TICK_S):
                return

    worker = threading.Thread(target=tick, name="gpucost-progress", daemon=True)
    worker.start()
    try:
        yield
    finally:
        done.set()
        worker.join()
        out.write("\r\x1b[2K")  # erase the line: the answer follows on a clean screen
        out.flush()
