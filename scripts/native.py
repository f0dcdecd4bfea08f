"""Compile the estimator's hot modules (``optimizer.native.MODULES``) with mypyc into a build folder.

    .venv/bin/python scripts/native.py [--out DIR] [--force]

Run by ``scripts/setup``; ``optimizer.native`` uses the build only while every compiled module's
source is the one it was built from, so an edit makes the Python module run again until this runs
again (it rebuilds only then; ``--force`` always). Needs mypy (the dev extra) and a C compiler; on
failure it says why and exits 1, and the Python modules stay in use. The sources are compiled in a
temporary copy, so the checkout gets no build files; the folder is replaced whole, never half written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["GPUCOST_NATIVE"] = "0"  # this process only reads the sources

from optimizer import native


def build(out: Path) -> None:
    """Compile ``native.MODULES`` into ``out`` (replaced), with its manifest."""
    import mypy.version  # the compiler: missing without the dev extra

    digests = {m: native.source_digest(m) for m in native.MODULES}
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    with tempfile.TemporaryDirectory(prefix="gpucost-native-") as tmp:
        work = Path(tmp)
        # mypy reads the packages the modules import, so the whole core package is copied.
        shutil.copytree(REPO / "optimizer", work / "optimizer",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "data"))
        paths = [str(Path(*m.split(".")).with_suffix(".py")) for m in native.MODULES]
        done = subprocess.run([sys.executable, "-m", "mypyc", *paths], cwd=work, capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"mypyc failed (exit {done.returncode}):\n{tail}")
        extensions: dict[str, str] = {}
        for m in native.MODULES:
            rel = Path(*m.split(".")).with_name(m.rsplit(".", 1)[1] + suffix)
            extensions[m] = str(rel)
        shared = sorted(work.glob(f"*__mypyc{suffix}"))
        if len(shared) != 1:
            raise RuntimeError(f"expected one mypyc runtime library, found {[p.name for p in shared]}")
        extensions[shared[0].name[: -len(suffix)]] = shared[0].name
        if {m: native.source_digest(m) for m in native.MODULES} != digests:
            raise RuntimeError("the sources changed while they were compiled; run it again")
        manifest: dict[str, object] = {"tag": native.build_tag(), "mypy": mypy.version.__version__,
                                       "sources": digests, "extensions": extensions}
        out.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
        try:
            for rel in extensions.values():
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(work / rel, stage / rel)
            (stage / native.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            stage.chmod(0o755)  # mkdtemp makes it private
        except OSError:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    old = out.with_name(out.name + f".old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    stage.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="the build folder (default: optimizer.native.native_dir())")
    ap.add_argument("--force", action="store_true", help="rebuild even when the build is current")
    args = ap.parse_args()
    out = (args.out or native.native_dir()).resolve()
    if not args.force and native.current_build(out) is not None:
        print(f"native: {out} is current ({len(native.MODULES)} modules)")
        return 0
    t0 = time.perf_counter()
    try:
        build(out)
    except (RuntimeError, OSError, ImportError) as exc:
        print(f"native: not built, the Python modules stay in use: {exc}", file=sys.stderr)
        return 1
    print(f"native: compiled {len(native.MODULES)} modules into {out} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
