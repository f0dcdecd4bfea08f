from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from optimizer.frontier import FrontierResult
from service.answers import frontier_answer
from service.commands._common import console, emit, open_store_from_settings, write_charts, parse_csv_list
from service.commands.quote import option_row
from service.commands.workload_flags import (
    BatchOpt,
    CkptOpt,
    MethodOpt,
    ModelOpt,
    RequestOpt,
    SeqOpt,
    TokensOpt,
    request_from,
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
    def frontier(
        request: RequestOpt = None,
        model: ModelOpt = None,
        method: MethodOpt = None,
        micro_batch_size: BatchOpt = None,
        seq_len: SeqOpt = None,
        gradient_checkpointing: CkptOpt = None,
        tokens: TokensOpt = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="only these GPUs (comma-separated)")] = None,
        spot: Annotated[bool, typer.Option("--spot", help="allow spot capacity")] = False,
        runs: Annotated[int | None, typer.Option("--runs", min=1)] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/frontier shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown table")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="write the chart as PNG")] = None,
        svg: Annotated[Path | None, typer.Option("--svg", help="write the chart as SVG")] = None,
    ) -> None:
        """The Pareto set of (hours, cost) for one job: what a faster answer costs."""
        constraints = {k: v for k, v in {"gpus": parse_csv_list(gpu), "allow_spot": spot or None}.items() if v is not None}
        req = request_from(
            request, QuoteRequest,
            dict(model=model, method=method, micro_batch_size=micro_batch_size, seq_len=seq_len,
                 gradient_checkpointing=gradient_checkpointing, tokens=tokens),
            {"constraints": constraints or None, "runs": runs},
        )
        result = frontier_answer(req, open_store_from_settings())
        if png or svg:
            from service.render.charts import frontier_chart  # matplotlib: only when asked

            write_charts(lambda fmt: frontier_chart(result, fmt), png, svg)
        if markdown and not as_json:
            from service.render.markdown import frontier_markdown

            sys.stdout.write(frontier_markdown(result))
            return
        emit(result, as_json, render_frontier)
