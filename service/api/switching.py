"""A served process hands Python's lock to its event loop every 0.5 ms, not CPython's 5 ms.

Quotes, plans and estimates compute on pool threads and hold the interpreter lock while they do;
the event loop, which answers ``/healthz``, ``/readyz`` and cached answers, waits for it. Python
makes a thread that holds the lock give it up only after the switch interval, so under load a
cheap request waits up to that long each time the loop needs the lock back. The interval is a
setting of the process that runs the app. ``gpucost serve --workers N`` starts its processes
afresh (uvicorn spawns them), and a container may run ``service.api.asgi:app`` under uvicorn
itself, so the app's module sets it in every served process (``service.api.asgi``).

Measured (2 cores, ``bench/load.py --clients 4 --seconds 10 --distinct tokens,model --workers 2
[--mix quotes]``, 2026-12-05): with the processes at 5 ms, ``/healthz`` p50 under four clients of
new models was 5.0-5.5 ms (2 runs), at 0.5 ms 1.4-2.4 ms (8 runs); the quotes lost about 3 % of
their throughput to the extra hand-overs (132-142 against 142-144 new models a second).
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.0005


def hand_over_sooner() -> None:
    """Set this process's switch interval to ``SWITCH_INTERVAL_S``."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)
