from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from optimizer.results import Option, Quote
from service.render.commitments import commitment_lines
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
from service.render.labels import age_short, pricing_label, region_label
from service.schemas import QuoteRequest


def option_row(rank: str, o: Option) -> list[str]:
    where = (f"local build {o.instance_type}" if o.kind == "local"
             else f"{o.provider}/{region_label(o.region)} {o.instance_type}")
    gpus = f"{o.gpus_per_node:g}x {o.gpu}" + (f" x{o.nodes} nodes" if o.nodes > 1 else "")
    return [
        rank, where, gpus, pricing_label(o.pricing), f"{o.hours:,.2f}", f"${o.cost_usd:,.2f}",
        f"{o.memory_need_gb_per_gpu:.1f}/{o.vram_gb_per_gpu:g}",
        # micro-batch x accumulation (x GPUs) = global batch, as this option runs it.
        o.recipe.label() if o.recipe is not None else "-",
        f"{o.machines}" if o.machines is not None else "-",
        age_short(o.as_of),  # how old the price deciding this row is
    ]


def render_quote(q: Quote) -> None:
    # Only tables need rich: --json answers start without it.
    from rich.table import Table

    from service.commands._common import console

    table = Table(title=f"Quote for {q.runs} run(s), cheapest first")
    for col, just in (("#", "right"), ("provider/region/instance", "left"), ("GPUs", "left"),
                      ("pricing", "left"), ("hours/run", "right"), ("cost", "right"), ("GB need/VRAM", "right"),
                      ("recipe", "left"), ("machines", "right"), ("price age", "right")):
        # An instance type folds onto the next line rather than being cut with an ellipsis.
        table.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for i, o in enumerate(q.options, 1):
        chosen = i == 1 and q.best is not None
        row = option_row(f"{i} *" if chosen else str(i), o)
        table.add_row(*row, style="bold green" if chosen else None)
    console.print(table)
    if q.best is None:
        console.print("[red]No feasible option.[/red]")
    else:
        console.print(f"[bold green]*[/bold green] chosen: {option_row('', q.best)[1]} at ${q.best.cost_usd:,.2f}")
        for line in commitment_lines(q.best):
            console.print(line, markup=False, highlight=False)
    if q.fastest is not None and q.best is not None and q.fastest.hours < q.best.hours:
        f = q.fastest
        console.print(f"fastest: {option_row('', f)[1]} ({f.nodes} node(s)): {f.hours:,.2f} h for ${f.cost_usd:,.2f}")
    if q.rejected:
        console.print("rejected: " + "; ".join(f"{g.reason}: {g.count}" for g in q.rejected))
    # What JSON and Markdown carry, the table says too: old prices must not decide an answer silently.
    from rich.markup import escape

    for w in q.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    for i, o in enumerate(q.options, 1):  # each option's own risks (a tight fit, idle GPUs, a slow host)
        for w in o.warnings:
            console.print(f"[yellow]#{i}:[/yellow] {escape(w)}")
    if q.best is not None and q.best.calibration:
        cal = q.best.calibration
        console.print(f"corrected from reconciled bills: hours x{cal['hours_factor']:g}, rate x{cal['rate_factor']:g} "
                      f"(runs {', '.join(cal['runs'])})")
    if q.saved_run:
        console.print(f"saved as run {q.saved_run['run_id']}: {q.saved_run['note']}", markup=False)
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
