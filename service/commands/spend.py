"""``gpucost spend --by team|month|run [--csv|--parquet] [--out FILE]``: planned and billed spend
with FOCUS column names."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from optimizer.errors import InvalidInput
from service.commands._common import emit, open_store_from_settings


def _render(doc: object) -> None:
    from rich.table import Table

    from service.commands._common import console

    rows = doc.rows  # type: ignore[attr-defined]
    table = Table(title=f"Spend by {doc.by}: planned (quoted) vs billed")  # type: ignore[attr-defined]
    for col in ("key", "planned $", "billed $", "effective $", "planned h", "billed h"):
        table.add_column(col)
    for r in rows:
        key = r["x_Team"] if doc.by == "team" else r["x_Month"] if doc.by == "month" else r["x_RunId"]  # type: ignore[attr-defined]
        table.add_row(str(key), f"{r['x_PlannedCost']:,.2f}", f"{r['BilledCost']:,.2f}", f"{r['EffectiveCost']:,.2f}",
                      f"{r['x_PlannedHours']:,.2f}", f"{r['x_BilledHours']:,.2f}")
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command()
    def spend(
        by: Annotated[str, typer.Option("--by", help="team | month | run")] = "team",
        csv: Annotated[bool, typer.Option("--csv", help="CSV with FOCUS column names")] = False,
        parquet: Annotated[bool, typer.Option("--parquet", help="Parquet with FOCUS column names (needs --out)")] = False,
        out: Annotated[Path | None, typer.Option("--out", help="write to this file instead of stdout")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the GET /v1/spend shape)")] = False,
    ) -> None:
        """Planned and billed spend per team, month or run (FinOps tools load it unchanged)."""
        from service.bills import SPEND_BY, spend_csv, spend_parquet, spend_rows
        from service.run_schemas import SpendResponse

        if by not in SPEND_BY:
            raise InvalidInput("--by", f"{by!r}: one of {', '.join(SPEND_BY)}")
        if sum((csv, parquet, as_json)) > 1:
            raise InvalidInput("--csv", "give one of --csv, --parquet, --json")
        if parquet and out is None:
            raise InvalidInput("--parquet", "Parquet is binary: give --out FILE")
        rows = spend_rows(open_store_from_settings(), by)
        if csv or parquet:
            body: str | bytes = spend_csv(rows) if csv else spend_parquet(rows)
            if out is None:
                sys.stdout.write(body)  # type: ignore[arg-type]
                return
            try:
                out.write_bytes(body.encode() if isinstance(body, str) else body)
            except OSError as exc:
                raise InvalidInput("--out", f"cannot write {out}: {exc.strerror or exc}") from None
            typer.echo(f"wrote {len(rows)} rows to {out}", err=True)
            return
        doc = SpendResponse(by=by, rows=rows)
        if out is not None:
            try:
                out.write_text(doc.model_dump_json())
            except OSError as exc:
                raise InvalidInput("--out", f"cannot write {out}: {exc.strerror or exc}") from None
            return
        emit(doc, as_json, _render)
