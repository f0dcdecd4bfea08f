"""ASGI entry point for uvicorn and container images: ``service.api.asgi:app``.

A served app computes plans, frontiers and recommendations in worker processes (one per solve
slot) unless ``GPUCOST_SOLVE_PROCESSES`` says otherwise; apps built in tests keep them on threads.
"""

import multiprocessing

from service.api import affinity, descriptors, heap, switching
from service.api.app import create_app
from service.api.balance import ProcessLoads
from service.api.lifetime import end_with_parent
from service.settings import get_settings

_settings = get_settings()
if "solve_processes" not in _settings.model_fields_set:
    _settings = _settings.model_copy(update={"solve_processes": _settings.max_solves})

heap.keep_long_lived()  # a served process's large heap: full collections must not stall it
switching.hand_over_sooner()  # a computing thread yields to the event loop after 0.5 ms, in each of --workers N
descriptors.reserve()  # room for a burst of connections, made now rather than during accept()
if multiprocessing.parent_process() is not None:
    # One of ``gpucost serve --workers N``'s processes, started by uvicorn's supervisor: when that
    # is killed outright (no SIGTERM to pass on), this one ends too, and its solve workers with it.
    end_with_parent(ignore_interrupt=False)
# With its siblings, when ``gpucost serve --workers N`` made them a loads file (``balance``).
app = create_app(_settings, loads=ProcessLoads.from_environment())
# Once the app is made (a server that cannot start binds nothing), before it serves; its solve
# workers were given every CPU this process had (``affinity.allowed_cpus``).
affinity.bind_to_one_cpu(_settings.serve_cpu_affinity)
