"""What outlives a request is kept out of the cycle collector's walk, so no collection stalls the server.

A served process holds a large, long-lived heap: the prepared offers and their index, the
estimator's and the configurations' memos. CPython's cycle collector walked it over and over:

* a full (generation 2) collection walked every tracked object, 96-135 ms each time
  (``gc.callbacks`` during ``bench/abuse.py``, 2-core machine, 2026-12-01), finding nothing to free;
* a young collection walked several requests' survivors, not one's: every object the memos' LRU
  bound lets go counts down the allocations that start the next young collection, so on a server
  answering new models the young generation grew to 21,000-40,000 objects between collections
  and each took 12-27 ms; a middle (generation 1) collection about 76 ms (in-process quotes for
  new models, ``gc.callbacks``, 2026-12-01 23:40 UTC).

They run on whichever thread allocates, the event loop's included, so every request in flight
waited. ``gc.freeze()`` (Python's documented remedy) moves every tracked object to a permanent
generation the collector no longer walks, at the same small cost whatever the heap (it joins
lists). A served process freezes at the end of every request: a collection then walks only what the
requests in flight made since. Frozen objects are still freed by reference counting (memo entries
dropped by their LRU bound go at once); only garbage in reference cycles among them would stay.
Requests that succeed leave none: measured per route on a live server with the collector off
(quote, estimate, break-even with its PNG and SVG charts, frontier, plan, recommend, offers, the
page, ``/metrics``, a 404, a 422 for a bad field, the guard's own 413 and 429: 0 objects each),
while a body that is not JSON left 63 (FastAPI's error path keeps the exception's frames). The
compiled estimator modules (``optimizer.native``) once made such cycles: two nested functions and
the closures mypyc made for them referred to each other, and one held a request's memo with all its
estimates, so a process answering new models grew by about 1.4 MB a quote until the thaw, to 3.5 GB
after 2,400 (2026-12-05). ``tests/integration/test_native.py`` now holds every answer, compiled and in
Python, to no cycle left by questions nobody asked before. So

* a failed request (status 400 or more, but for the guard's refusals, which a burst sends by the
  thousand) has what requests made since the last freeze collected at its end, its own cycles
  included, before the freeze;
* a failed request that was in flight while another one's end froze the heap may have had its
  cycles frozen: after ``THAW_AFTER_EXPOSED`` of those, and in any case once per ``THAW_EVERY_S``,
  the next request end thaws, collects everything and freezes again (one slow collection then).
"""

from __future__ import annotations

import gc
import threading
import time

# How often frozen objects are given back to the collector (cyclic garbage among them collected).
THAW_EVERY_S = 3600.0
# Failed requests that a freeze caught in flight (each may have left a few dozen objects in
# cycles, frozen) before the next request end thaws and collects them.
THAW_AFTER_EXPOSED = 500
# Allocations between young collections in a served process (CPython's default: 700). Interleaved
# in one process (``bench/young_gc.py``, 2-core machine, four runs on 2026-12-01), a quote for a
# new model took 13-29 % less time at 10,000, a new token count 1-3 % less, a restricted quote the
# same; at 50,000 no better than at 10,000 (over HTTP the new model gained 5-9 %,
# ``bench/ab_quotes.py``). Only cyclic garbage waits longer for its collection (most objects go by
# reference counting), at most this many allocations more.
YOUNG_THRESHOLD = 10_000
# Answers the guard gives from its own code (``middleware``: body over the limit, admission
# refused): they leave no cycles, and a burst of them must not each run a collection.
REFUSALS = frozenset({413, 429})

_lock = threading.Lock()
_installed = False
_freezes = 0  # freezes so far: a request that sees this change while in flight was frozen in flight
_exposed = 0  # failed requests frozen in flight since the last thaw
_last_thawed = 0.0


def keep_long_lived() -> None:
    """Freeze at every request end from now on, and collect young objects less often (once per
    process; the server calls it at start)."""
    global _installed, _last_thawed
    with _lock:
        if _installed:
            return
        _installed = True
        _last_thawed = time.monotonic()
        young, *older = gc.get_threshold()
        gc.set_threshold(max(young, YOUNG_THRESHOLD), *older)


def request_started() -> int:
    """A mark taken when a request starts, for ``request_ended``."""
    return _freezes


def request_ended(started: int, status: int) -> bool:
    """At the end of a request answered with ``status`` (``started``: its ``request_started``),
    between requests (the middleware; never inside the collector): collect after a failure, thaw
    when due, freeze. True when it froze (only in a served process)."""
    global _freezes, _exposed, _last_thawed
    if not _installed:
        return False
    failed = status >= 400 and status not in REFUSALS
    with _lock:
        if failed:
            # What requests made since the last freeze: this one's objects and its cycles, if any.
            gc.collect(1)
            if _freezes != started:
                _exposed += 1
        if _exposed >= THAW_AFTER_EXPOSED or time.monotonic() - _last_thawed >= THAW_EVERY_S:
            _exposed = 0
            _last_thawed = time.monotonic()
            gc.unfreeze()
            gc.collect()
        gc.freeze()
        _freezes += 1
    return True


def frozen_objects() -> int:
    """Objects in the permanent generation (for tests and ``/metrics``)."""
    return gc.get_freeze_count()
