from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table

from optimizer.results import Option, Quote
from service.answers import quote_answer
from service.commands._common import console, emit, open_store_from_settings, parse_csv_list
from service.commands.workload_flags import (
    BatchOpt,
    CkptOpt,
    MethodOpt,
    ModelOpt,
    OptimizerOpt,
    PrecisionOpt,
    RankOpt,
    RequestOpt,
    SeqOpt,
    ShardingOpt,
    TokensOpt,
    request_from,
)
from service.schemas import QuoteRequest


def option_row(rank: str, o: Option) -> list[str]:
    where = f"local build {o.instance_type}" if o.kind == "local" else f"{o.provider}/{o.region} {o.instance_type}"
    gpus = f"{o.gpus_per_node:g}x {o.gpu}" + (f" x{o.nodes} nodes" if o.nodes > 1 else "")
    return [
        rank, where, gpus, o.pricing.replace("_", "-"), f"{o.hours:,.2f}", f"${o.cost_usd:,.2f}",
        f"{o.memory_need_gb_per_gpu:.1f}/{o.vram_gb_per_gpu:g}",
    ]


def render_quote(q: Quote) -> None:
    table = Table(title=f"Quote for {q.runs} run(s), cheapest first")
    for col, just in (("#", "right"), ("provider/region/instance", "left"), ("GPUs", "left"),
                      ("pricing", "left"), ("hours/run", "right"), ("cost", "right"), ("GB need/VRAM", "right")):
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
    def quote(
        request: RequestOpt = None,
        model: ModelOpt = None,
        method: MethodOpt = None,
        precision: PrecisionOpt = None,
        optimizer: OptimizerOpt = None,
        micro_batch_size: BatchOpt = None,
        seq_len: SeqOpt = None,
        gradient_checkpointing: CkptOpt = None,
        sharding: ShardingOpt = None,
        lora_rank: RankOpt = None,
        tokens: TokensOpt = None,
        gpu: Annotated[str | None, typer.Option("--gpu", help="only these GPUs (comma-separated)")] = None,
        provider: Annotated[str | None, typer.Option("--provider", help="only these providers (comma-separated)")] = None,
        deadline_hours: Annotated[float | None, typer.Option("--deadline-hours", help="each run must finish within")] = None,
        budget: Annotated[float | None, typer.Option("--budget", help="USD for all runs")] = None,
        spot: Annotated[bool, typer.Option("--spot", help="allow spot capacity")] = False,
        no_local: Annotated[bool, typer.Option("--no-local", help="leave local builds out")] = False,
        runs: Annotated[int | None, typer.Option("--runs", min=1, help="runs of the job")] = None,
        top: Annotated[int | None, typer.Option("--top", min=1, help="alternatives to list")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/quote shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown table")] = False,
    ) -> None:
        """Cheapest way to run a training job: cloud offers and local builds, ranked."""
        constraints = {
            "gpus": parse_csv_list(gpu),
            "providers": parse_csv_list(provider),
            "deadline_hours": deadline_hours,
            "budget_usd": budget,
            "allow_spot": spot or None,
            "include_local": False if no_local else None,
        }
        constraints = {k: v for k, v in constraints.items() if v is not None}
        req = request_from(
            request,
            QuoteRequest,
            dict(
                model=model, method=method, precision=precision, optimizer=optimizer,
                micro_batch_size=micro_batch_size, seq_len=seq_len,
                gradient_checkpointing=gradient_checkpointing, sharding=sharding, lora_rank=lora_rank,
                tokens=tokens,
            ),
            {"constraints": constraints or None, "runs": runs, "top": top},
        )
        result = quote_answer(req, open_store_from_settings())
        if markdown and not as_json:
            from service.render.markdown import quote_markdown

            sys.stdout.write(quote_markdown(result))
            return
        emit(result, as_json, render_quote)
