"""``bench/code_state.py``: what code a bench says it measured (compiled modules, current bytecode)."""

from __future__ import annotations

import importlib.util
import os
import py_compile
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_state", REPO / "bench" / "code_state.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bytecode_is_current_only_where_it_matches_its_source(tmp_path: Path) -> None:
    cs = _load()
    sources = []
    for package in cs.PACKAGES:
        (tmp_path / package / "sub").mkdir(parents=True)
        for rel in ("__init__.py", "sub/mod.py"):
            (tmp_path / package / rel).write_text(f"X = {len(sources)}\n")
            sources.append(tmp_path / package / rel)
    assert cs.bytecode_current(tmp_path) == (0, 6)  # none written yet
    for source in sources:
        py_compile.compile(str(source), doraise=True)
    assert cs.bytecode_current(tmp_path) == (6, 6)
    sources[1].write_text("X = 'changed, one byte longer than before'\n")  # an edit after the bytecode
    assert cs.bytecode_current(tmp_path) == (5, 6)
    st = sources[2].stat()
    os.utime(sources[2], (st.st_atime, st.st_mtime + 5))  # same size, touched: the mtime tells
    assert cs.bytecode_current(tmp_path) == (4, 6)


def test_it_says_when_the_compiled_modules_are_turned_off() -> None:
    cs = _load()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    line = cs.describe({**env, "GPUCOST_NATIVE": "0"})
    from optimizer import native

    assert line.startswith(f"code measured: 0 of {len(native.MODULES)} estimator modules compiled (GPUCOST_NATIVE=0); "
                           "bytecode current for ")
    assert cs.compiled_modules({**env, "GPUCOST_NATIVE": "0"}) == (0, len(native.MODULES))
