from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from optimizer.frontier import FrontierResult
from service.answers import frontier_answer
from service.commands._common import console, emit, open_store_from_settings, output_mode, write_charts
from service.commands.quote import option_row
from service.commands.workload_flags import (
    CONSTRAINT_FLAGS,
    WORKLOAD_FLAGS,
    RequestOpt,
    constraint_fields,
    request_from,
    with_flags,
    workload_fields,
)
from service.schemas import QuoteRequest


def render_frontier(f: FrontierResult) -> None:
    table = Table(title=f"Cost / time frontier ({f.runs} run(s)), fastest first")
    for col in ("#", "provider/region/instance", "GPUs", "pricing", "hours/run", "cost", "$ per hour saved"):
        table.add_column(col)
    for i, p in enumerate(f.points, 1):
        row = option_row(str(i), p.option)[:6]
        table.add_row(*row, f"${p.usd_per_hour_saved:,.2f}" if p.usd_per_hour_saved is not None else "-")
    console.print(table)
    if not f.points:
        console.print("[red]No feasible option.[/red] " + "; ".join(f"{g.reason}: {g.count}" for g in f.rejected))


def register(app: typer.Typer) -> None:
    @app.command()
    @with_flags(WORKLOAD_FLAGS, CONSTRAINT_FLAGS)
    def frontier(
        flags: dict[str, Any],
        request: RequestOpt = None,
        runs: Annotated[int | None, typer.Option("--runs", min=1, help="runs of the job")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/frontier shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown table")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="write the chart as PNG")] = None,
        svg: Annotated[Path | None, typer.Option("--svg", help="write the chart as SVG")] = None,
    ) -> None:
        """The Pareto set of (hours, cost) for one job: what a faster answer costs."""
        mode = output_mode(as_json, markdown)
        req = request_from(
            request, QuoteRequest, workload_fields(flags), {"constraints": constraint_fields(flags), "runs": runs},
        )
        result = frontier_answer(req, open_store_from_settings())
        if png or svg:
            from service.render.charts import frontier_chart  # matplotlib: only when asked

            write_charts(lambda fmt: frontier_chart(result, fmt), png, svg)
        if mode == "markdown":
            from service.render.markdown import frontier_markdown

            sys.stdout.write(frontier_markdown(result))
            return
        emit(result, mode == "json", render_frontier)
