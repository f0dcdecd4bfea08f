"""The ``gpucost`` command: a typer app whose commands live in ``service.commands``.

Errors are mapped once, here: bad input -> one line on stderr and exit 2; any other failure ->
one line and exit 1. Set GPUCOST_DEBUG=1 for tracebacks.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click
import typer
from typer.core import TyperGroup

from optimizer.errors import GpucostError, InvalidInput

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
)


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class _Group(TyperGroup):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except InvalidInput as exc:
            _fail(f"{exc.field}: {exc.reason}", 2)
        except GpucostError as exc:
            _fail(str(exc), 1)
        except KeyboardInterrupt:
            _fail("interrupted", 1)
        except Exception as exc:  # noqa: BLE001 - the CLI never shows a raw traceback
            if os.environ.get("GPUCOST_DEBUG"):
                raise
            _fail(f"{type(exc).__name__}: {exc}", 1)
        return None


app = typer.Typer(
    cls=_Group,
    name="gpucost",
    help="Rent cloud GPU hours or buy a card? Estimates, sourced prices and an ILP decision.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

for _name in COMMAND_MODULES:
    importlib.import_module(f"service.commands.{_name}").register(app)


def main() -> None:
    try:
        app()
    except SystemExit as exc:
        sys.exit(exc.code)
