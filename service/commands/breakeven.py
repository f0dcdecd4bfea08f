from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from optimizer.breakeven import BreakevenResult
from service.answers import breakeven_answer
from service.commands._common import console, emit, open_store_from_settings, write_charts
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
from service.schemas import BreakevenRequest


def render_breakeven(r: BreakevenResult) -> None:
    table = Table(title=f"Rent or buy at {r.runs_per_month:g} runs/month")
    for col in ("", "option", "hours/run", "cost/run", "up front"):
        table.add_column(col)
    table.add_row("rent", f"{r.rent.provider}/{r.rent.region} {r.rent.instance_type} ({r.rent.gpu_count:g}x {r.rent.gpu})",
                  f"{r.rent.hours_per_run:,.2f}", f"${r.rent.cost_per_run_usd:,.2f}", "-")
    table.add_row("buy", f"{r.buy.build} ({r.buy.name})", f"{r.buy.hours_per_run:,.2f}",
                  f"${r.buy.energy_per_run_usd:,.2f} energy", f"${r.buy.capex_usd:,.0f} (resale ${r.buy.resale_usd:,.0f})")
    console.print(table)
    if r.breakeven_runs is None:
        console.print("[bold]break-even: never[/bold] (a rented run costs no more than the energy of an owned one)")
    else:
        life = "" if r.within_lifetime else f" [yellow](after the {r.buy.lifetime_months}-month life)[/yellow]"
        console.print(f"[bold]break-even: {r.breakeven_runs} runs = {r.breakeven_months:.1f} months[/bold]{life}")
    sens = Table(title="Sensitivity")
    for col in ("parameter", "value", "break-even runs", "months"):
        sens.add_column(col)
    for s in r.sensitivity:
        sens.add_row(s.parameter, f"{s.value:g}", str(s.breakeven_runs) if s.breakeven_runs is not None else "never",
                     f"{s.breakeven_months:.1f}" if s.breakeven_months is not None else "-")
    console.print(sens)
    for n in r.notes:
        console.print(f"[dim]note: {n}[/dim]")


def register(app: typer.Typer) -> None:
    @app.command()
    def breakeven(
        request: RequestOpt = None,
        model: ModelOpt = None,
        method: MethodOpt = None,
        micro_batch_size: BatchOpt = None,
        seq_len: SeqOpt = None,
        gradient_checkpointing: CkptOpt = None,
        tokens: TokensOpt = None,
        rent_gpu: Annotated[str | None, typer.Option("--rent-gpu", help="rent the cheapest offer of this GPU")] = None,
        rent_provider: Annotated[str | None, typer.Option("--rent-provider")] = None,
        rent_instance: Annotated[str | None, typer.Option("--rent-instance", help="with --rent-provider")] = None,
        buy_gpu: Annotated[str | None, typer.Option("--buy-gpu", help="buy the cheapest build with this GPU")] = None,
        buy_build: Annotated[str | None, typer.Option("--buy-build", help="buy this build id")] = None,
        runs_per_month: Annotated[float | None, typer.Option("--runs-per-month")] = None,
        horizon_months: Annotated[int | None, typer.Option("--horizon-months")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/breakeven shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="write the cumulative-cost chart as PNG")] = None,
        svg: Annotated[Path | None, typer.Option("--svg", help="write the chart as SVG")] = None,
    ) -> None:
        """Rent or buy for one job: cost per run each way, break-even runs and months, the chart."""
        rent = {k: v for k, v in {"gpu": rent_gpu, "provider": rent_provider, "instance_type": rent_instance}.items()
                if v is not None}
        buy = {k: v for k, v in {"gpu": buy_gpu, "build": buy_build}.items() if v is not None}
        req = request_from(
            request, BreakevenRequest,
            dict(model=model, method=method, micro_batch_size=micro_batch_size, seq_len=seq_len,
                 gradient_checkpointing=gradient_checkpointing, tokens=tokens),
            {"rent": rent or None, "buy": buy or None, "runs_per_month": runs_per_month,
             "horizon_months": horizon_months},
        )
        result = breakeven_answer(req, open_store_from_settings())
        if png or svg:
            from service.render.charts import breakeven_chart  # matplotlib: only when asked

            write_charts(lambda fmt: breakeven_chart(result, fmt), png, svg)
        if markdown and not as_json:
            from service.render.markdown import breakeven_markdown

            chart = str(png) if png else (str(svg) if svg else None)
            sys.stdout.write(breakeven_markdown(result, chart))
            return
        if (png or svg) and not as_json:
            render_breakeven(result)
            return
        emit(result, as_json, render_breakeven)
