"""What the ``gpucost`` command offers besides its commands: ``--version``, examples at the end
of each command's help, and shell completion of presets, methods and GPU names.

Kept apart from ``service.cli`` (which builds the app and maps errors) and from the command
modules: the examples and completions of every command are here in one table, applied to the
command tree once it is built, so a command module only declares its options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Command path (as typed after ``gpucost``) -> examples. Click keeps lines after "\b" unwrapped.
EXAMPLES: dict[str, list[str]] = {
    "estimate": [
        "gpucost estimate --model llama-3-8b --method qlora --gpu RTX4090",
        "gpucost estimate --request job.json --gpu A100-80GB --gpus 2 --json",
    ],
    "quote": [
        "gpucost quote --model llama-3-8b --method qlora --tokens 1e8 --deadline-hours 24",
        "gpucost quote --request examples/quote.json --markdown > quote.md",
        "cat job.json | gpucost quote --request - --json",
    ],
    "breakeven": [
        "gpucost breakeven --model llama-3-8b --method qlora --rent-gpu A100-80GB --buy-gpu RTX4090",
        "gpucost breakeven --request examples/breakeven.json --png breakeven.png",
    ],
    "plan": [
        "gpucost plan --request examples/plan.json",
        "gpucost plan --request examples/plan.json --horizon-months 24 --markdown > plan.md",
    ],
    "recommend": [
        "gpucost recommend --model qwen2.5-7b --method qlora --budget 3000",
    ],
    "frontier": [
        "gpucost frontier --model llama-3-8b --method lora --tokens 1e9 --png frontier.png",
    ],
    "offers": [
        "gpucost offers --gpu A100 --count 8",
        "gpucost offers --gpu H100 --provider aws,gcp --spot --limit 5 --json",
    ],
    "gpus": ["gpucost gpus", "gpucost gpus --json"],
    "models": ["gpucost models", "gpucost models --json"],
    "serve": [
        "gpucost serve",
        "GPUCOST_DB_URL=postgresql+psycopg://gpucost@db/gpucost gpucost serve --host 0.0.0.0 --port 8000",
    ],
    "prices": ["gpucost prices status", "gpucost prices refresh --provider aws"],
    "prices refresh": ["gpucost prices refresh", "gpucost prices refresh --provider aws --json"],
    "prices status": ["gpucost prices status --json"],
    "prices history": ["gpucost prices history p4d.24xlarge --provider aws --region us-east-1"],
    "prices import": [
        "gpucost prices import --format skypilot ~/skypilot-catalog/catalogs/v6",
        "gpucost prices import --format skypilot gcp/vms.csv --as-of 2026-11-01",
    ],
    "probe": ["gpucost probe --model gpt2 --device cpu --steps 5 --json"],
    "measurements": ["gpucost measurements list", "gpucost measurements add measurement.json"],
    "runs": ["gpucost runs list --json"],
    "reconcile": ["gpucost reconcile bill.csv --format focus --markdown"],
    "spend": ["gpucost spend --by team", "gpucost spend --by month --csv --out spend.csv"],
    "quotas": ["gpucost quotas list", "gpucost quotas refresh"],
}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("gpucost")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def print_version(value: bool) -> None:
    """The ``--version`` option's callback (eager: it answers before any command runs)."""
    if value:
        print(f"gpucost {version()}")
        raise SystemExit(0)


# Help is 80 columns wide (service.cli); click indents the epilog by 2 and each example by 2 more.
_HELP_WIDTH = 80
_EXAMPLE_INDENT = 4


def _wrapped(example: str) -> list[str]:
    """``example`` in lines that fit the help's width, continued shell-style (`` \\``) and broken
    only before a flag, a pipe or a redirection, so each flag stays beside its value and the
    lines still paste into a shell as one command. A piece longer than a line stays whole."""
    pieces: list[str] = []
    for word in example.split():
        if pieces and (word == "-" or not word.startswith(("-", "|", ">", "<"))):  # "-": stdin, a value
            pieces[-1] += f" {word}"
        else:
            pieces.append(word)
    lines = [pieces[0]]
    for piece in pieces[1:]:
        indent = _EXAMPLE_INDENT if len(lines) == 1 else _EXAMPLE_INDENT + 4
        # Room for the line, a space, the piece and the " \\" this line then ends with.
        if indent + len(lines[-1]) + 1 + len(piece) + 2 <= _HELP_WIDTH:
            lines[-1] += f" {piece}"
        else:
            lines[-1] += " \\"
            lines.append(f"    {piece}")
    return lines


def _examples(examples: list[str]) -> str:
    lines = [line for example in examples for line in _wrapped(example)]
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


# -- completion -------------------------------------------------------------------------------


def _matching(names: Callable[[], list[str]]) -> Callable[[Any, Any, str], list[str]]:
    def complete(_ctx: Any, _param: Any, incomplete: str) -> list[str]:
        low = incomplete.lower()
        return [n for n in names() if n.lower().startswith(low)]

    return complete


def _presets() -> list[str]:
    from optimizer.estimator.shapes import preset_names

    return preset_names()


def _gpus() -> list[str]:
    from optimizer.estimator.gpus import gpu_names

    return list(gpu_names())


def _methods() -> list[str]:
    from typing import get_args

    from optimizer.estimator.workload import Method

    return list(get_args(Method))


# Option name (click's parameter name) -> what completes it.
COMPLETIONS: dict[str, Callable[[], list[str]]] = {
    "model": _presets,
    "method": _methods,
    "gpu": _gpus,
    "rent_gpu": _gpus,
    "buy_gpu": _gpus,
}


def _walk(command: Any, path: str) -> None:
    lines = EXAMPLES.get(path)
    if lines and not command.epilog:
        command.epilog = _examples(lines)
    for param in command.params:
        complete = COMPLETIONS.get(param.name or "")
        # Options only (a GPU argument elsewhere keeps its own), and never over a command's own.
        if complete is not None and param.param_type_name == "option" and param._custom_shell_complete is None:  # noqa: SLF001
            param._custom_shell_complete = _matching(complete)  # noqa: SLF001 - the hook click and typer call
    for name, sub in (getattr(command, "commands", None) or {}).items():
        _walk(sub, f"{path} {name}".strip())


def decorate(group: Any) -> Any:
    """Examples and completions added to the built ``gpucost`` command tree."""
    _walk(group, "")
    return group
