from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from optimizer.results import Option, Quote
from service.answers import quote_answer
from service.commands._common import (
    emit,
    keep_prepared_snapshot,
    open_reader_from_settings,
    output_mode,
)
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


def option_row(rank: str, o: Option) -> list[str]:
    where = f"local build {o.instance_type}" if o.kind == "local" else f"{o.provider}/{o.region} {o.instance_type}"
    gpus = f"{o.gpus_per_node:g}x {o.gpu}" + (f" x{o.nodes} nodes" if o.nodes > 1 else "")
    return [
        rank, where, gpus, o.pricing.replace("_", "-"), f"{o.hours:,.2f}", f"${o.cost_usd:,.2f}",
        f"{o.memory_need_gb_per_gpu:.1f}/{o.vram_gb_per_gpu:g}",
        # micro-batch x accumulation (x GPUs) = global batch, as this option runs it.
        o.recipe.label() if o.recipe is not None else "-",
        f"{o.machines}" if o.machines is not None else "-",
    ]


def render_quote(q: Quote) -> None:
    # Only tables need rich: --json answers start without it.
    from rich.table import Table

    from service.commands._common import console

    table = Table(title=f"Quote for {q.runs} run(s), cheapest first")
    for col, just in (("#", "right"), ("provider/region/instance", "left"), ("GPUs", "left"),
                      ("pricing", "left"), ("hours/run", "right"), ("cost", "right"), ("GB need/VRAM", "right"),
                      ("recipe", "left"), ("machines", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for i, o in enumerate(q.options, 1):
        chosen = i == 1 and q.best is not None
        row = option_row(f"{i} *" if chosen else str(i), o)
        table.add_row(*row, style="bold green" if chosen else None)
    console.print(table)
    if q.best is None:
        console.print("[red]No feasible option.[/red]")
    else:
        console.print(f"[bold green]*[/bold green] chosen: {option_row('', q.best)[1]} at ${q.best.cost_usd:,.2f}")
    if q.fastest is not None and q.best is not None and q.fastest.hours < q.best.hours:
        f = q.fastest
        console.print(f"fastest: {option_row('', f)[1]} ({f.nodes} node(s)): {f.hours:,.2f} h for ${f.cost_usd:,.2f}")
    if q.rejected:
        console.print("rejected: " + "; ".join(f"{g.reason}: {g.count}" for g in q.rejected))
    s = q.solver
    console.print(f"solver {s.name}: {s.status} in {s.seconds * 1000:.1f} ms · snapshot {q.snapshot_id}")


def register(app: typer.Typer) -> None:
    @app.command()
    @with_flags(WORKLOAD_FLAGS, CONSTRAINT_FLAGS)
    def quote(
        flags: dict[str, Any],
        request: RequestOpt = None,
        runs: Annotated[int | None, typer.Option("--runs", min=1, help="runs of the job")] = None,
        top: Annotated[int | None, typer.Option("--top", min=1, help="alternatives to list")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/quote shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown section")] = False,
    ) -> None:
        """Cheapest way to run a training job: cloud offers and local builds, ranked."""
        mode = output_mode(as_json, markdown)
        req = request_from(
            request, QuoteRequest, workload_fields(flags),
            {"constraints": constraint_fields(flags), "runs": runs, "top": top},
        )
        store = open_reader_from_settings()
        result = quote_answer(req, store)
        if mode == "markdown":
            from service.render.markdown import quote_markdown

            sys.stdout.write(quote_markdown(result))
        else:
            emit(result, mode == "json", render_quote)
        keep_prepared_snapshot(store)
