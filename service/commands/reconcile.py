"""``gpucost reconcile FILE [--format focus|cur2|gcp-billing] [--json|--markdown]``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from optimizer.errors import InvalidInput
from service.commands._common import emit, open_store_from_settings, output_mode

MAX_FILE_BYTES = 200_000_000


def _render(r: object) -> None:
    from service.render.reconcile_markdown import reconcile_markdown

    sys.stdout.write(reconcile_markdown(r))  # type: ignore[arg-type]


def register(app: typer.Typer) -> None:
    @app.command()
    def reconcile(
        file: Annotated[Path, typer.Argument(help="the bill: FOCUS, AWS CUR 2.0 or GCP billing export, CSV or Parquet")],
        fmt: Annotated[str | None, typer.Option("--format", help="focus | cur2 | gcp-billing (default: from the columns)")] = None,
        rate: Annotated[list[str] | None, typer.Option("--rate", help="CUR=USD_PER_UNIT for a bill not in USD (repeat)")] = None,
        now: Annotated[datetime | None, typer.Option("--now", help="read the bill as of this UTC time (billing lag)")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the POST /v1/reconcile shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown section")] = False,
    ) -> None:
        """Compare the bill with the planned runs: per-run differences, unmatched spend, and the
        corrections later quotes apply. The bill is stored whole or not at all."""
        from pricing.billing import FORMATS
        from pricing.billing.table import BillFileError
        from service.bills import parse_rates, reconcile_answer

        mode = output_mode(as_json, markdown)
        if fmt is not None and fmt not in FORMATS:
            raise InvalidInput("--format", f"{fmt!r}: one of {', '.join(FORMATS)}")
        try:
            size = file.stat().st_size
            if size > MAX_FILE_BYTES:
                raise InvalidInput("FILE", f"{file} is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
            data = file.read_bytes()
        except OSError as exc:
            raise InvalidInput("FILE", f"cannot read {file}: {exc.strerror or exc}") from None
        when = None if now is None else (now if now.tzinfo else now.replace(tzinfo=UTC))
        try:
            result = reconcile_answer(data, fmt, open_store_from_settings(), rates=parse_rates(rate), now=when)
        except BillFileError as exc:
            raise InvalidInput(f"{file}: column {exc.field}" if exc.field not in ("file", "format")
                               else f"{file}", exc.reason) from None
        emit(result, mode == "json", _render)
