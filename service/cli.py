"""The ``gpucost`` command: a typer app whose commands live in ``service.commands``.

Errors are mapped once, here: bad input (a bad flag, a bad value, a bad request file) -> one line
on stderr naming the flag or field, and exit 2; any other failure -> one line and exit 1. Set
GPUCOST_DEBUG=1 for tracebacks. Help is plain click help wrapped at 80 columns, so no option name
is cut off in a narrow terminal. ``gpucost --install-completion`` sets up shell completion.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Annotated, Any, NoReturn

import typer
from typer import _click as click  # typer >= 0.26 vendors click; click itself is never loaded
from typer.core import TyperGroup

from optimizer.errors import GpucostError, InvalidInput
from service.cli_help import decorate, print_version  # --version, examples in help, completion of names

COMMAND_MODULES = (
    "estimate",
    "catalog",
    "serve",
    "prices",
    "quote",
    "breakeven",
    "plan",
    "recommend",
    "frontier",
    "runs",
    "reconcile",
    "spend",
    "quotas",
    "probe",
    "measurements",
)

_USAGE_ERRORS = (click.exceptions.UsageError,)
_EXITS = (typer.Exit, typer.Abort, click.exceptions.NoArgsIsHelpError)
_CLICK_ERRORS = (click.exceptions.ClickException,)


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _flag_of(param: Any) -> str | None:
    """The long spelling of a parameter's flag (``--micro-batch-size``), or its name."""
    if param is None:
        return None
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")] or list(getattr(param, "opts", []))
    return max(opts, key=len) if opts else getattr(param, "name", None)


def usage_message(exc: Exception, argv: list[str]) -> str:
    """One line for a click usage error that names the flag it is about."""
    option = getattr(exc, "option_name", None)
    if option and type(exc).__name__ == "NoSuchOption":
        near = sorted(getattr(exc, "possibilities", None) or [])
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        return f"{option}: no such option{hint}"
    flag = _flag_of(getattr(exc, "param", None)) or option
    if flag and type(exc).__name__ == "MissingParameter":
        return f"{flag}: required"
    message = getattr(exc, "message", "") or exc.format_message()  # type: ignore[attr-defined]
    if flag:
        # "Option '--tokens' requires an argument." -> "--tokens: requires an argument."
        message = re.sub(r"(?:[Oo]ption )?'-[^']*' ?", "", message).strip(" :")
        return f"{flag}: {message}"
    if "unexpected extra argument" in message:
        # ``--spot true``: a switch followed by a value. Name the switch the value came after.
        extra = message.rsplit("(", 1)[-1].rstrip(")").split()[0] if "(" in message else ""
        if extra in argv:
            before = argv[argv.index(extra) - 1] if argv.index(extra) > 0 else ""
            if before.startswith("--"):
                return f"{before}: takes no value (got {extra!r}); it is a switch: {before} or --no-{before[2:]}"
        return f"unexpected argument {extra!r}" if extra else message
    return message


class _Group(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The root group (subcommand groups are typer's own class), built from its commands: add
        # the examples and completions here, so every way of running the app shows them, ``main``
        # and ``app()`` / typer's CliRunner alike.
        decorate(self)

    def invoke(self, ctx: click.Context) -> Any:
        argv = [*getattr(ctx, "protected_args", []), *ctx.args]
        try:
            return super().invoke(ctx)
        except _EXITS:
            raise
        except _USAGE_ERRORS as exc:
            _fail(usage_message(exc, argv), 2)
        except _CLICK_ERRORS as exc:
            _fail(exc.format_message(), 1)
        except InvalidInput as exc:
            _fail(f"{exc.field}: {exc.reason}", 2)
        except GpucostError as exc:
            _fail(str(exc), 1)
        except KeyboardInterrupt:
            _fail("interrupted", 1)
        except BrokenPipeError:
            # ``gpucost ... | head``: the reader left; say nothing more on a closed pipe.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(1) from None
        except Exception as exc:  # noqa: BLE001 - the CLI never shows a raw traceback
            if os.environ.get("GPUCOST_DEBUG"):
                raise
            _fail(f"{type(exc).__name__}: {exc}", 1)
        return None


# Command name -> the module that registers it, where the two differ. A module's commands are
# imported only when they are asked for: a quote need not pay for the plan solver, the server or
# the charts. A name missing here only costs time (every module is then loaded).
_MODULE_OF = {"gpus": "catalog", "models": "catalog", "offers": "prices"}


def build_app(modules: tuple[str, ...] = COMMAND_MODULES) -> typer.Typer:
    """The ``gpucost`` app with the commands of ``modules`` registered."""
    new_app = typer.Typer(
        cls=_Group,
        name="gpucost",
        help="Rent cloud GPU hours or buy a card? Estimates, sourced prices and an ILP decision.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        # Plain click help: rich's option tables cut long flag names at 80 columns.
        rich_markup_mode=None,
        context_settings={"max_content_width": 80, "terminal_width": 80, "help_option_names": ["-h", "--help"]},
        add_completion=True,
    )

    @new_app.callback()
    def _root(
        version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                              callback=print_version)] = False,
    ) -> None:
        pass

    for name in modules:
        importlib.import_module(f"service.commands.{name}").register(new_app)
    return new_app


def _names(typer_app: typer.Typer) -> set[str]:
    names = {c.name or (c.callback.__name__.replace("_", "-") if c.callback else "") for c in typer_app.registered_commands}
    return names | {g.name or "" for g in typer_app.registered_groups}


def app_for(argv: list[str]) -> typer.Typer:
    """An app holding the command ``argv`` names, or every command when it names none, asks for
    help or completion, or names one this table does not know (so click's own errors and
    suggestions are unchanged)."""
    first = argv[0] if argv else ""
    if not first or first.startswith("-") or any(k.endswith("_COMPLETE") for k in os.environ):
        return build_app()
    module = _MODULE_OF.get(first, first)
    if module not in COMMAND_MODULES:
        return build_app()
    one = build_app((module,))
    return one if first in _names(one) else build_app()


def __getattr__(name: str) -> Any:
    # ``from service.cli import app``: the full app, built on first use.
    if name == "app":
        globals()["app"] = built = build_app()
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _command(typer_app: typer.Typer) -> click.Command:
    """The click group of ``typer_app``, a group even when it holds a single command (typer
    would otherwise make that command the whole program), with the completion options."""
    group = typer.main.get_group(typer_app)
    group.params.extend(typer.main.get_install_completion_arguments())
    return group  # examples and completions: added as _Group is built


# Set while a command's modules are imported, unless the user set them; gone before it runs, so
# the processes it starts (a server's workers, a probe's training) get the environment they were
# given. numpy's OpenBLAS starts a thread per core as it loads, and those spin waiting for work that
# never comes (gpucost calls no BLAS routine): some 0.1 s of CPU on every command, a core taken from
# whatever else runs. pydantic looks for plugins through every installed package's entry points
# as it builds the first model (some 10 ms here); gpucost has none, and typer already turns them
# off while it builds its own validators. OpenBLAS reads its count once, as it loads; pydantic
# reads the variable at each model it builds, so a model a command builds later (one deferred,
# ``optimizer.deferred_models``) still has pydantic look then, as before (``bench/cli_startup.py``
# times each).
_IMPORT_ENV = {"OPENBLAS_NUM_THREADS": "1", "PYDANTIC_DISABLE_PLUGINS": "__all__"}


@contextlib.contextmanager
def _import_env() -> Iterator[None]:
    """``_IMPORT_ENV``'s variables the user did not set, set for the duration."""
    added = {k: v for k, v in _IMPORT_ENV.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def main() -> NoReturn:
    # The command's modules are imported with the cycle collector off: what they make lives as
    # long as the process, and collections during the imports walked that growing heap again and
    # again (``bench/cli_startup.py``). Frozen, it is out of the walk of the collections the
    # command itself runs, with the collector back on.
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _import_env():
            command = _command(app_for(sys.argv[1:]))
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
    try:
        command()
    except SystemExit as exc:
        leave(exc.code)
    leave(0)


def leave(code: object) -> NoReturn:
    """End the process with ``code`` (as ``sys.exit`` reads it) once the command is done.

    Exit handlers run and output is flushed, but the interpreter is not torn down object by
    object: freeing the libraries a quote loads (pydantic's schemas, numpy, the solver) takes a
    quarter of a CLI quote's time (``bench/cli_startup.py``), and the operating system frees a
    process's memory at once. While another thread still runs, the normal way is taken.
    """
    if threading.active_count() > 1:
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's own exit would report it too
            status = status or 120
    os._exit(status)
