"""What code a bench measures: whether the estimator's compiled modules are served and whether the
project's bytecode is current, one line for the top of a bench's output.

Both change the figures (a new model's quote x0.76-0.81 compiled, a CLI quote 0.78 s against 0.54 s
with its bytecode written), and neither shows otherwise: a build goes stale after an edit, and an
editable checkout has no bytecode until ``scripts/setup`` writes it (``PYTHONDONTWRITEBYTECODE``
set, nothing else does).

Run alone: .venv/bin/python bench/code_state.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("optimizer", "pricing", "service")

# Run in a child with the bench's environment, as its servers and commands see it.
_COMPILED = ("import json; from optimizer import native\n"
             "for m in native.MODULES: __import__(m)\n"
             "print(json.dumps([len(native.compiled()), len(native.MODULES)]))")


def compiled_modules(env: dict[str, str] | None = None, root: Path = REPO) -> tuple[int, int]:
    """(modules served compiled, modules that can be) in a fresh process with ``env``, importing the
    code in ``root`` (a checkout; an older one without compiled modules: (0, 0))."""
    if not (root / "optimizer" / "native.py").is_file():
        return 0, 0
    done = subprocess.run([sys.executable, "-c", _COMPILED], cwd=root, env=env, capture_output=True, text=True,
                          check=True)
    served, total = json.loads(done.stdout)
    return int(served), int(total)


def bytecode_current(root: Path = REPO) -> tuple[int, int]:
    """(sources whose cached bytecode matches them, sources) in the project's packages: a pyc
    records its source's mtime and size (the default, timestamp-checked kind)."""
    current = total = 0
    for package in PACKAGES:
        for source in sorted((root / package).rglob("*.py")):
            total += 1
            try:
                header = Path(importlib.util.cache_from_source(str(source))).read_bytes()[:16]
                st = source.stat()
            except OSError:
                continue
            if len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER:
                flags, mtime, size = struct.unpack("<III", header[4:16])
                current += flags == 0 and mtime == int(st.st_mtime) & 0xFFFFFFFF and size == st.st_size & 0xFFFFFFFF
    return current, total


def describe(env: dict[str, str] | None = None, root: Path = REPO) -> str:
    served, total = compiled_modules(env, root)
    fresh, sources = bytecode_current(root)
    seen = os.environ if env is None else env  # what the bench's children see
    native = seen.get("GPUCOST_NATIVE", "")
    return (f"code measured: {served} of {total} estimator modules compiled"
            + (f" (GPUCOST_NATIVE={native})" if native else "")
            + f"; bytecode current for {fresh} of {sources} modules"
            + (" (PYTHONDONTWRITEBYTECODE set)" if seen.get("PYTHONDONTWRITEBYTECODE") else ""))


if __name__ == "__main__":
    print(describe())
