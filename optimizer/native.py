"""The estimator's hot modules compiled to C (mypyc), used only when built from exactly these sources.

A new model's quote makes about 130 estimates, each some hundred small float computations in
Python; ``scripts/native.py`` compiles the modules they run in (``MODULES``) with mypyc, which turns
their typed code into C functions calling each other directly. The compiled modules compute the
same floats in the same order: ``tests/integration/test_native.py`` holds their quotes to the
Python ones, byte for byte, on a grid, and runs the unit and contract tests on them. Compiled, an
annotation is checked as the code runs: a value it does not admit raises ``TypeError`` there.

A dataclass's generated ``__init__`` is Python that the ``dataclasses`` module writes at import,
so a compiled module calling it leaves C for the interpreter (and a frozen one's sets each field
through ``object.__setattr__``): 0.24 us for a six-field class, 0.69 us frozen, against 0.03 us
for an ``__init__`` written in the class and compiled with it (a scratch module, 2026-12-05). A new
model's quote made about 1,600 of them. So the classes the estimator makes per (card, count) pair
say ``init=False`` and write their ``__init__`` out: ``tests/unit/test_native_inits.py`` holds each to
its fields (names, order, defaults) and ``test_native.py`` to running compiled. Compiled code cannot
assign a frozen dataclass's fields, so those that were frozen are not now; ``unsafe_hash=True`` keeps
them hashable as they were, and nothing assigns to them after ``__init__``.

A build is a folder (``native_dir``) holding each module's extension next to a manifest of the
SHA-256 of the source it was compiled from. ``install`` (run when ``optimizer`` is imported) serves
the compiled modules through an import finder only when every listed source still hashes to its
manifest entry and the build is for this interpreter: a build left behind by an edit or a checkout
is ignored, never run stale. ``GPUCOST_NATIVE=0`` turns it off (the test suite runs the Python
modules, whose internals its tests patch); ``GPUCOST_NATIVE_DIR`` names another build folder.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import sysconfig
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from pathlib import Path
from types import ModuleType

# The modules a quote's estimates and configurations run in, compiled together (calls between them
# are direct C calls). Classes they define become native classes: nothing adds attributes to them,
# subclasses them in Python or pickles them (the prepared snapshot holds none: test_native.py).
# Not compiled: the kept configurations' moves (``candidates.amounts``, ``candidates.amount_rows``),
# whose classes are weakly referenced; a build with ``amounts`` crashed the interpreter at exit.
MODULES = (
    "optimizer.estimator.throughput",
    "optimizer.estimator.memory",
    "optimizer.estimator.host",
    "optimizer.estimator.amounts",
    "optimizer.estimator.ranges",
    "optimizer.estimator.estimate",
    "optimizer.estimator.recipe",
    "optimizer.estimator.precision",
    "optimizer.candidates.cloud",
    "optimizer.candidates.fitting",
    "optimizer.candidates.headroom",
    "optimizer.candidates.estimator",
    "optimizer.candidates.local",
    "optimizer.candidates.local_sizes",
    "optimizer.candidates.batch",
    "optimizer.candidates.feeding",
    "optimizer.costs",
    "optimizer.spot_walls",
    "optimizer.estimator.gpus",
    "optimizer.estimator.stacks",
    "optimizer.estimator.shapes",
    "optimizer.estimator.memo",
    "optimizer.estimator.construct",
    "optimizer.estimator.states",
)
MANIFEST = "manifest.json"
_ROOT = Path(__file__).resolve().parent.parent  # the folder holding the ``optimizer`` package


def native_dir() -> Path:
    """Where the build for this interpreter lives: ``GPUCOST_NATIVE_DIR``, else ``.native/<tag>`` in
    the checkout (``scripts/native.py`` writes it there)."""
    given = os.environ.get("GPUCOST_NATIVE_DIR")
    return Path(given) if given else _ROOT / ".native" / build_tag()


def build_tag() -> str:
    """The interpreter a build is for: its extension modules' tag (implementation, version, ABI and
    platform: ``cpython-311-x86_64-linux-gnu``)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or f".{sys.implementation.cache_tag}.so"
    return suffix.strip(".").removesuffix(".so").removesuffix(".pyd").replace("/", "_")


def source_path(module: str) -> Path:
    return _ROOT.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


class _Finder(MetaPathFinder):
    """Serves the listed modules (and mypyc's shared library) from their compiled extensions."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(name)
        if file is None:
            return None
        return importlib.util.spec_from_file_location(
            name, file, loader=importlib.machinery.ExtensionFileLoader(name, str(file)))


def current_build(folder: Path) -> dict[str, Path] | None:
    """The build in ``folder`` as {module: extension}, when it was made for this interpreter from the
    sources as they are now; None otherwise (no build, another interpreter, a source changed since)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        if manifest.get("tag") != build_tag() or sorted(manifest.get("sources", {})) != sorted(MODULES):
            return None
        if any(manifest["sources"][m] != source_digest(m) for m in MODULES):
            return None
        files = {name: (folder / rel).resolve() for name, rel in manifest["extensions"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    # Only the listed modules and mypyc's one runtime library, from files inside the folder.
    others = [name for name in files if name not in MODULES]
    if (not set(MODULES) <= set(files) or len(others) != 1 or not others[0].endswith("__mypyc")
            or "." in others[0]):
        return None
    inside = folder.resolve()
    return files if all(f.is_file() and f.is_relative_to(inside) for f in files.values()) else None


_FINDER: _Finder | None = None


def install() -> None:
    """Serve the compiled modules when a current build exists and ``GPUCOST_NATIVE`` is not "0"
    (``compiled`` says which were). Must run before they are first imported (``optimizer/__init__``)."""
    global _FINDER
    if _FINDER is not None or os.environ.get("GPUCOST_NATIVE", "1").strip() == "0":
        return
    files = current_build(native_dir())
    if files is None or any(m in sys.modules for m in MODULES):
        return
    _FINDER = _Finder(files)
    sys.meta_path.insert(0, _FINDER)


def compiled() -> tuple[str, ...]:
    """The modules imported from their compiled extensions in this process."""
    return tuple(m for m in MODULES if getattr(sys.modules.get(m), "__file__", "").endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)))
