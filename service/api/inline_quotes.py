"""Which plain quotes the quick route (``quick_quote``) computes on the event loop, not a thread.

FastAPI runs a sync route on a worker thread: the event loop hands the call over, the thread wakes,
computes, and hands the answer back, waking the loop again. That costs a served quote about 0.1-0.3
ms back to back and more after a pause, when the sleeping thread's wake-up meets cold caches.
Served restricted quotes with a new token count, on the loop against on a thread
(``bench/idle_gap.py``, p50 of 40, two runs each way, 2026-12-06): back to back 1.52 / 1.45 against
1.66 / 1.78 ms; after 100 ms idle 3.89 / 3.95 against 4.04 / 4.40 ms; after another process
computed for 100 ms on the server's CPU 3.40 / 3.45 against 3.81 / 4.15 ms. A quote whose
estimates this process already holds takes 1-3 ms to compute, so the hand-over is a tenth of it
(``docs/performance-distinct.md``, thirty-fifth pass).

So a quote is computed where the request already is, on the event loop, when three things hold:

* other clients have left this process quiet: no quote, break-even, estimate or plan that came
  on another connection has finished here for ``QUIET_S``. One client's requests, asked one after
  another on its connection (a person at the page, a script's sweep), never wait for each other,
  so its quotes may go on the loop back to back; while several clients are served at once (a
  team's traffic, a load test) every quote goes to a thread as before, so they compute side by
  side and share the interpreter fairly;
* nothing else is admitted: no other request is running or waiting in this process's lanes
  (``limits.Lane``);
* its job is known to compute quickly: the last quote of the same job (the workload but for its
  amount of training, ``Workload.rate_key``: what the estimates are kept under) computed within
  ``INLINE_MAX_S`` in this process. A job not seen yet (a new model, a new sequence length: its
  estimates are still to be made) or last seen taking longer goes to a thread.

While it computes, the loop reads no other request: one that arrives meanwhile (a ``/healthz``, an
answer from the cache) waits for it, about ``INLINE_MAX_S`` at most (longer only if the job has
become slower since it was timed). The answer is the same either way: the same route function is
called with the same arguments, in the request's context (its ticket and deadline).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from service.api.limits import Limits

# A quote computed on the loop holds any request arriving meanwhile for this long at most: ten of
# the interpreter's thread switches (0.5 ms each, ``service.api.switching``), and more than the
# 1-3 ms a quote of a known job takes back to back.
INLINE_MAX_S = 0.005
# How long other connections must have had nothing computed here before a quote is computed on
# the loop: far longer than a client's turn-around between requests sent back to back (well under
# 1 ms on loopback), so several clients asking at once keep their threads.
QUIET_S = 0.005
# Jobs whose last time is kept; the oldest is forgotten (its next quote then goes to a thread).
MAX_JOBS = 256


class InlineQuotes:
    """The last compute time of recent jobs, and the choice it makes. Used from the event loop only."""

    def __init__(self, limits: Limits, max_s: float = INLINE_MAX_S, quiet_s: float = QUIET_S,
                 max_jobs: int = MAX_JOBS, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.max_s = max_s
        self.quiet_s = quiet_s
        self.max_jobs = max_jobs
        self.clock = clock
        self._last: OrderedDict[str, float] = OrderedDict()

    def inline(self, job: str, connection: object = None) -> bool:
        """Compute the quote of ``job``, asked on ``connection`` (ASGI's ``scope["client"]``), on
        the loop: other connections left this process quiet, only this quote is admitted, and the
        job was quick last time."""
        last = self._last.get(job)
        if last is None or last > self.max_s:
            return False
        lanes = self.limits.lanes.values()
        # This request holds one place in the quote lane; any other running or waiting request
        # computes (or will) on a thread, and would wait behind the loop.
        if sum(lane.running + lane.waiting for lane in lanes) > 1:
            return False
        return self.clock() - max(lane.others_released_at(connection) for lane in lanes) >= self.quiet_s

    def took(self, job: str, seconds: float) -> None:
        """``job``'s quote computed in ``seconds`` (its own time, on whichever thread)."""
        last = self._last
        last[job] = seconds
        last.move_to_end(job)
        while len(last) > self.max_jobs:
            last.popitem(last=False)
