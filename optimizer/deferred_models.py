"""Models built when first used: what a CLI quote never validates or serialises is not built at import.

Defining a pydantic model builds its validator and serializer, 1-4 ms each. ``gpucost quote`` imports
49 of gpucost's models and builds 12: its request, the workload, the settings, the answer and what
they hold. The other 37 (offers read back with ``model_construct``, an estimate's parts, the
requests and answers of other routes and commands) say ``defer_build=True`` and are built the first
time something validates or serialises one directly (a model built at import that holds one
carries its schema inline; the deferred class stays unbuilt). ``tests/integration/test_cli_startup.py``
holds a quote to building none of them. A server builds them all when its app is made
(``build_deferred``), and with them the validators FastAPI wraps a route's models in, which follow
the model's ``defer_build`` (``service.api.app.build_route_validators``), so no request waits for one.
"""

from __future__ import annotations

from pydantic import BaseModel

OWN_PACKAGES = ("optimizer", "pricing", "service")


def own_models() -> list[type[BaseModel]]:
    """gpucost's pydantic models in the modules imported so far."""
    out: list[type[BaseModel]] = []
    seen: set[type[BaseModel]] = set()
    stack: list[type[BaseModel]] = [BaseModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub in seen:
                continue
            seen.add(sub)
            stack.append(sub)
            if sub.__module__.split(".", 1)[0] in OWN_PACKAGES:
                out.append(sub)
    return out


def deferred(cls: type[BaseModel]) -> bool:
    """Whether ``cls`` waits to be built until first used."""
    return bool(cls.model_config.get("defer_build"))


def build_deferred() -> None:
    """Build every deferred model not built yet, of the modules imported so far."""
    for cls in own_models():
        if deferred(cls) and not cls.__pydantic_complete__:
            cls.model_rebuild()
