"""``bench/estimator_accuracy.py`` loaded as a module, for the tests that score the estimator with it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def estimator_accuracy() -> ModuleType:
    """The bench module (one instance per process: its dataclasses must stay the same classes)."""
    loaded = sys.modules.get("estimator_accuracy")
    if loaded is not None:
        return loaded
    path = REPO / "bench" / "estimator_accuracy.py"
    spec = importlib.util.spec_from_file_location("estimator_accuracy", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["estimator_accuracy"] = module
    spec.loader.exec_module(module)
    return module
