"""Long-lived objects out of the cycle collector's way, so a full collection cannot stall the server.

A served process holds a large, long-lived heap: the prepared offers and their index, the
estimator's and the configurations' memos. CPython's full (generation 2) collection walks every
tracked object, and on that heap it took 96-135 ms each time (measured with ``gc.callbacks``
during ``bench/abuse.py``, 2-core machine, 2026-12-01) while finding nothing to free. It runs on
whichever thread allocates, the event loop's included, so every request in flight waited: under a
burst of 300 quotes the 429s of that burst arrived 130 ms late.

``gc.freeze()`` (Python's documented remedy) moves every tracked object to a permanent generation
the collector no longer walks. This module freezes after a full collection was slow, on the event
loop between requests (not inside the collector's callback): what survived it is what the process
keeps. Frozen objects are still freed by reference counting (memo entries dropped by their LRU
bound go at once); only garbage in reference cycles among them would stay, so once an hour the
next request end thaws, collects and freezes again (one slow collection an hour instead of many).

The young generation is collected less often too (``YOUNG_THRESHOLD``): a quote for a model nobody
asked about makes some hundred thousand short-lived objects, and CPython's default threshold of 700
allocations ran a young collection every few hundred of them.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

# A full collection slower than this is the sign of a large surviving heap worth freezing
# (on a small heap a full collection takes well under a millisecond).
SLOW_FULL_COLLECTION_S = 0.02
# How often frozen objects are given back to the collector (cyclic garbage among them collected).
THAW_EVERY_S = 3600.0
# Allocations between young collections in a served process (CPython's default: 700). Interleaved
# in one process (``bench/young_gc.py``, 2-core machine, four runs on 2026-12-01), a quote for a
# new model took 13-29 % less time at 10,000, a new token count 1-3 % less, a restricted quote the
# same; at 50,000 no better than at 10,000 (over HTTP the new model gained 5-9 %,
# ``bench/ab_quotes.py``). Only cyclic garbage waits longer for its collection (most objects go by
# reference counting), at most this many allocations more.
YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_installed = False
_started = 0.0
_due = False
_last_thawed = 0.0


def _observe(phase: str, info: dict[str, Any]) -> None:
    global _started, _due
    if info.get("generation") != 2:
        return
    if phase == "start":
        _started = time.perf_counter()
    elif time.perf_counter() - _started > SLOW_FULL_COLLECTION_S:
        _due = True  # freeze at the next request end: the collector's callback is no place for it


def keep_long_lived() -> None:
    """Watch full collections in this process and collect its young objects less often (once per
    process; the server calls it at start)."""
    global _installed, _last_thawed
    with _lock:
        if _installed:
            return
        _installed = True
        _last_thawed = time.monotonic()
        gc.callbacks.append(_observe)
        young, *older = gc.get_threshold()
        gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)


def settle_if_due() -> bool:
    """Between requests: freeze after a slow full collection, and thaw and refreeze once an hour.
    True when it froze. Cheap when nothing is due (two reads)."""
    global _due, _last_thawed
    if not _due and (not _installed or time.monotonic() - _last_thawed < THAW_EVERY_S):
        return False
    with _lock:
        _due = False
        if time.monotonic() - _last_thawed >= THAW_EVERY_S:
            _last_thawed = time.monotonic()
            gc.unfreeze()
            gc.collect()
        gc.freeze()
    return True


def frozen_objects() -> int:
    """Objects in the permanent generation (for tests and ``/metrics``)."""
    return gc.get_freeze_count()
