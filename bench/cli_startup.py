"""Time for the CLI to answer a quote once set up, against baselines measured in the same run.

* baselines: ``python -c pass`` (the interpreter alone) and ``gpucost --help`` (every command
  registered, nothing computed);
* ``gpucost quote --model llama-3-8b --method qlora --tokens 1e8 --json`` on a store already
  created and seeded (the set-up is timed once, apart);
* the same quote when its snapshot has no prepared file yet (the first quote on new prices: the
  store opened through SQLAlchemy, every offer loaded and pruned, the file written for the next);
* the quote as ``gpucost`` runs it (the command's modules imported with the cycle collector off,
  then frozen: ``service.cli.main``) against the same quote with the collector on throughout (the
  code before), the two taken in turn;
* the quote with numpy's OpenBLAS held to one thread while the command's modules load (what
  ``service.cli.main`` does) against OpenBLAS's own thread per core, wall and CPU, taken in turn;
* the quote with the project's bytecode written (``scripts/setup`` writes it) against the same quote
  from a copy of the packages without it, each run compiling what it imports, taken in turn;
* where a quote's time goes, in a fresh process: importing the quote command, opening the current
  snapshot (``service.prepared``), the quote itself; and which heavy libraries that process never
  imported (the ORM, the server, the charts, the cloud SDKs, the migration tool).

Wall and CPU (user + system of the child) are p50 of ``--runs`` runs: on a shared, busy machine
the CPU time is what the command itself costs.

The first line says what code ran (``bench/code_state.py``). Its work folder is removed at the end.

Run: .venv/bin/python bench/cli_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from code_state import PACKAGES, describe  # bench/ is on sys.path when run as a script
from workdir import work_folder

REPO = Path(__file__).resolve().parents[1]
QUOTE = ["quote", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "1e8", "--json"]

# Libraries a quote has no use for; each would cost tens to hundreds of milliseconds to import.
NOT_NEEDED = ["sqlalchemy", "alembic", "fastapi", "uvicorn", "starlette", "matplotlib", "pandas", "boto3", "botocore",
              "google.cloud", "alibabacloud_ecs20140526", "httpx", "pricing.adapters"]

# Run in a fresh interpreter: the quote's phases, timed as the command runs them.
PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
from service.cli import app_for
app_for(["quote"])
t1 = time.perf_counter()
from service.answers import quote_answer
from service.commands._common import open_reader_from_settings
from service.schemas import QuoteRequest
t2 = time.perf_counter()
store = open_reader_from_settings()
t3 = time.perf_counter()
req = QuoteRequest.model_validate({"workload": {"model": "llama-3-8b", "method": "qlora", "tokens": 1e8}})
q = quote_answer(req, store)
t4 = time.perf_counter()
print(json.dumps({"import": t2 - t0, "open": t3 - t2, "quote": t4 - t3, "reader": type(store).__name__,
                  "offers": [q.estimate.get("offers_considered"), q.estimate.get("offers_total")],
                  "loaded": sorted(m for m in NOT_NEEDED if m in sys.modules)}))
"""


def gpucost() -> list[str]:
    exe = Path(sys.executable).with_name("gpucost")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from service.cli import main; main()"]


def without_bytecode(work: Path) -> Path:
    """A folder holding a copy of the project's packages without their bytecode, and of the
    estimator's compiled build (its manifest names the same sources, so it is used there too):
    on ``PYTHONPATH`` it comes before the editable install's finder."""
    copy = work / "no-bytecode"
    for package in PACKAGES:
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    if (REPO / ".native").is_dir():
        shutil.copytree(REPO / ".native", copy / ".native")
    return copy


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the child's user + system) of one run of ``cmd``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def timed(cmd: list[str], env: dict[str, str], n: int) -> tuple[float, float]:
    """p50 wall seconds and p50 CPU seconds (user + system) of ``cmd`` over ``n`` runs."""
    walls, cpus = zip(*(run_once(cmd, env) for _ in range(n)), strict=True)
    return statistics.median(walls), statistics.median(cpus)


# ``service.cli.main`` as it was before the collector was turned off for the imports.
# OpenBLAS and pydantic's plugins held as ``main`` holds them, so that only the collector differs.
COLLECTING_MAIN = (
    "import sys\n"
    "from service import cli\n"
    "try:\n"
    "    with cli._import_env():\n"
    "        command = cli._command(cli.app_for(sys.argv[1:]))\n"
    "    command()\n"
    "except SystemExit as exc:\n"
    "    cli.leave(exc.code)\n"
    "cli.leave(0)\n"
)


def in_turn_cpu(a: list[str], b: list[str], env: dict[str, str], n: int,
                env_b: dict[str, str] | None = None) -> tuple[tuple[float, float], tuple[float, float]]:
    """((wall, CPU) p50 of ``a``, (wall, CPU) p50 of ``b``) in seconds, ``b`` with ``env_b`` if given,
    run one after the other ``n`` times each (the order alternating), so a change in the machine's
    load shifts both alike. CPU is the child's user + system time."""
    runs: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    for i in range(n):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            runs[k].append(run_once((a, b)[k], (env, env_b or env)[k]))
    walls_a, cpus_a = zip(*runs[0], strict=True)
    walls_b, cpus_b = zip(*runs[1], strict=True)
    return ((statistics.median(walls_a), statistics.median(cpus_a)),
            (statistics.median(walls_b), statistics.median(cpus_b)))


def in_turn(a: list[str], b: list[str], env: dict[str, str], n: int,
            env_b: dict[str, str] | None = None) -> tuple[float, float]:
    """p50 wall seconds of ``a`` and of ``b``, taken in turn (``in_turn_cpu``)."""
    (wall_a, _), (wall_b, _) = in_turn_cpu(a, b, env, n, env_b)
    return wall_a, wall_b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per command (p50 reported)")
    args = ap.parse_args()
    measure(args, work_folder("gpucost-clistart-"))  # removed at exit


def measure(args: argparse.Namespace, work: Path) -> None:
    env = {**os.environ, "GPUCOST_DB_URL": f"sqlite:///{work / 'g.sqlite'}", "XDG_DATA_HOME": str(work),
           "GPUCOST_ANSWER_CACHE": "false", "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true"}

    print(describe(env))
    t = time.perf_counter()
    first = subprocess.run([*gpucost(), *QUOTE], env=env, check=True, capture_output=True, text=True)
    json.loads(first.stdout)  # one JSON document, or this bench measures a broken command
    print(f"set-up: first quote, store created, migrated and seeded: {time.perf_counter() - t:.2f} s")

    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("gpucost --help", [*gpucost(), "--help"]),
        ("gpucost " + " ".join(QUOTE), [*gpucost(), *QUOTE]),
    ]
    results = {name: timed(cmd, env, args.runs) for name, cmd in rows}
    prepared = work / "g.sqlite.prepared"
    results["the same quote, its snapshot not yet prepared (first quote on new prices)"] = timed(
        ["sh", "-c", f'rm -rf "{prepared}" && exec "$@"', "sh", *gpucost(), *QUOTE], env, args.runs)
    base_wall, base_cpu = results["python -c pass"]
    help_wall = results["gpucost --help"][0]
    print(f"p50 of {args.runs} runs each, same machine, same run:")
    for name, (w, c) in results.items():
        print(f"  {name:<80} {w:6.2f} s wall {c:6.2f} s CPU  "
              f"(x{w / base_wall:5.1f} python, x{w / help_wall:4.2f} --help)")
    quote_wall, quote_cpu = results["gpucost " + " ".join(QUOTE)]
    print(f"quote beyond the interpreter: {quote_wall - base_wall:.2f} s wall, {quote_cpu - base_cpu:.2f} s CPU; "
          f"beyond --help: {quote_wall - help_wall:+.2f} s wall")

    off, on = in_turn([sys.executable, "-c", "from service.cli import main; main()", *QUOTE],
                      [sys.executable, "-c", COLLECTING_MAIN, *QUOTE], env, 2 * args.runs)
    print(f"imports with the collector off, then frozen: {off:.3f} s wall against {on:.3f} s with it on "
          f"(x{off / on:.2f}; p50 of {2 * args.runs} each, taken in turn)")

    # One OpenBLAS thread while the command's modules load (``service.cli._import_env``) against
    # OpenBLAS's own count: a thread count the user sets is left alone, so naming every core here
    # gives the process what it had before.
    cores = os.cpu_count() or 1
    (one_wall, one_cpu), (all_wall, all_cpu) = in_turn_cpu(
        [*gpucost(), *QUOTE], [*gpucost(), *QUOTE], env, 2 * args.runs, {**env, "OPENBLAS_NUM_THREADS": str(cores)})
    print(f"numpy's OpenBLAS on one thread while the command loads: {one_wall:.3f} s wall, {one_cpu:.3f} s CPU "
          f"against {all_wall:.3f} s wall, {all_cpu:.3f} s CPU on {cores} (x{one_wall / all_wall:.2f} wall, "
          f"x{one_cpu / all_cpu:.2f} CPU; p50 of {2 * args.runs} each, taken in turn)")

    # pydantic's look for plugins skipped while the command loads, against a user who set the
    # variable empty (kept as given; pydantic then looks through every package's entry points).
    skipped, looked = in_turn([*gpucost(), *QUOTE], [*gpucost(), *QUOTE], env, 2 * args.runs,
                              {**env, "PYDANTIC_DISABLE_PLUGINS": ""})
    print(f"pydantic's plugin look-up skipped while the command loads: {skipped:.3f} s wall against "
          f"{looked:.3f} s with it (x{skipped / looked:.2f}; p50 of {2 * args.runs} each, taken in turn)")

    # What scripts/setup's bytecode step buys: the quote from a copy of the project's packages (and
    # its compiled build) that has no bytecode, each run compiling the modules it imports, as every
    # command did here before setup wrote it (PYTHONDONTWRITEBYTECODE set, as on this machine).
    copy = without_bytecode(work)
    written, unwritten = in_turn([*gpucost(), *QUOTE], [*gpucost(), *QUOTE], env, 2 * args.runs,
                                 {**env, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"})
    print(f"the quote with the project's bytecode written (scripts/setup): {written:.3f} s wall against "
          f"{unwritten:.3f} s from a copy without it (x{written / unwritten:.2f}; p50 of {2 * args.runs} each, "
          "taken in turn)")

    code = f"NOT_NEEDED = {NOT_NEEDED!r}\n" + PHASES
    phases = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                        text=True).stdout) for _ in range(args.runs)]
    p50 = {k: statistics.median(p[k] for p in phases) for k in ("import", "open", "quote")}
    considered, total = phases[0]["offers"]
    print("in-process phases, p50: " + ", ".join(f"{k} {v:.3f} s" for k, v in p50.items())
          + f" (read through {phases[0]['reader']}; {considered} of {total} offers looked at)")
    loaded = phases[0]["loaded"]
    print("not imported by a quote: " + ", ".join(m for m in NOT_NEEDED if m not in loaded)
          + (f"; imported anyway: {', '.join(loaded)}" if loaded else ""))


if __name__ == "__main__":
    main()
