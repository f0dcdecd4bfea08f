"""ASGI entry point for uvicorn and container images: ``service.api.asgi:app``.

A served app computes plans, frontiers and recommendations in worker processes (one per solve
slot) unless ``GPUCOST_SOLVE_PROCESSES`` says otherwise; apps built in tests keep them on threads.
"""

from service.api.app import create_app
from service.settings import get_settings

_settings = get_settings()
if "solve_processes" not in _settings.model_fields_set:
    _settings = _settings.model_copy(update={"solve_processes": _settings.max_solves})

app = create_app(_settings)
