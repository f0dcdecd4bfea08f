from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from optimizer.breakeven import BreakevenResult
from optimizer.errors import InvalidInput
from service.answers import breakeven_answer
from service.commands._common import console, emit, open_store_from_settings, output_mode, write_charts
from service.commands.workload_flags import (
    CONSTRAINT_FLAGS,
    WORKLOAD_FLAGS,
    RequestOpt,
    pick,
    request_from,
    with_flags,
    workload_fields,
)
from service.schemas import BreakevenRequest


def render_breakeven(r: BreakevenResult) -> None:
    table = Table(title=f"Rent or buy at {r.runs_per_month:g} runs/month")
    for col in ("", "option", "hours/run", "cost/run", "up front"):
        table.add_column(col)
    from service.render.labels import breakeven_phrase, region_label

    table.add_row("rent", f"{r.rent.provider}/{region_label(r.rent.region)} {r.rent.instance_type} "
                  f"({r.rent.gpu_count:g}x {r.rent.gpu})",
                  f"{r.rent.hours_per_run:,.2f}", f"${r.rent.cost_per_run_usd:,.2f}", "-")
    table.add_row("buy", f"{r.buy.machines} x {r.buy.build} ({r.buy.name})", f"{r.buy.hours_per_run:,.2f}",
                  f"${r.buy.energy_per_run_usd:,.2f} energy", f"${r.buy.capex_usd:,.0f} (resale ${r.buy.resale_usd:,.0f})")
    console.print(table)
    # The same words as the Markdown and the web page (service/render/labels.py).
    console.print(f"[bold]break-even: {breakeven_phrase(r)}[/bold]")
    console.print(f"cheaper over {r.horizon_months} months: {r.cheaper_at_horizon}")
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
    @with_flags(WORKLOAD_FLAGS, pick(CONSTRAINT_FLAGS, "region", "spot", "electricity_usd_per_kwh", "electricity_region"))
    def breakeven(
        flags: dict[str, Any],
        request: RequestOpt = None,
        rent_gpu: Annotated[str | None, typer.Option("--rent-gpu", help="rent the cheapest offer of this GPU")] = None,
        rent_provider: Annotated[str | None, typer.Option("--rent-provider", help="rent from this provider")] = None,
        rent_instance: Annotated[str | None, typer.Option("--rent-instance", help="with --rent-provider")] = None,
        buy_gpu: Annotated[str | None, typer.Option("--buy-gpu", help="buy the cheapest build with this GPU")] = None,
        buy_build: Annotated[str | None, typer.Option("--buy-build", help="buy this build id")] = None,
        runs_per_month: Annotated[float | None, typer.Option("--runs-per-month", help="the cadence")] = None,
        horizon_months: Annotated[int | None, typer.Option("--horizon-months", help="months to chart")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/breakeven shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="write the cumulative-cost chart as PNG")] = None,
        svg: Annotated[Path | None, typer.Option("--svg", help="write the chart as SVG")] = None,
    ) -> None:
        """Rent or buy for one job: cost per run each way, break-even runs and months, the chart.

        --region and --spot apply to the rented side.
        """
        mode = output_mode(as_json, markdown)
        rent = {k: v for k, v in {"gpu": rent_gpu, "provider": rent_provider, "instance_type": rent_instance,
                                  "region": flags.get("region"), "spot": flags.get("spot")}.items() if v is not None}
        buy = {k: v for k, v in {"gpu": buy_gpu, "build": buy_build}.items() if v is not None}
        req = request_from(
            request, BreakevenRequest, workload_fields(flags),
            {"rent": rent or None, "buy": buy or None, "runs_per_month": runs_per_month,
             "horizon_months": horizon_months, "electricity_usd_per_kwh": flags.get("electricity_usd_per_kwh"),
             "electricity_region": flags.get("electricity_region")},
        )
        try:
            result = breakeven_answer(req, open_store_from_settings())
        except InvalidInput as exc:
            # A value given by flag is reported by its flag (--rent-gpu), not its request field.
            given = {"rent.gpu": ("--rent-gpu", rent_gpu), "buy.gpu": ("--buy-gpu", buy_gpu),
                     "buy.build": ("--buy-build", buy_build), "rent.instance_type": ("--rent-instance", rent_instance)}
            flag, value = given.get(exc.field, (None, None))
            if flag is None or value is None:
                raise
            raise InvalidInput(flag, exc.reason) from None
        if png or svg:
            from service.render.charts import breakeven_chart  # matplotlib: only when asked

            write_charts(lambda fmt: breakeven_chart(result, fmt), png, svg)
        if mode == "markdown":
            from service.render.markdown import breakeven_markdown

            chart = str(png) if png else (str(svg) if svg else None)
            sys.stdout.write(breakeven_markdown(result, chart))
            return
        emit(result, mode == "json", render_breakeven)
