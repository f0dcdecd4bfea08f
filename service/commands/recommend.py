from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from optimizer.recommend import RecommendResult
from service.answers import recommend_answer
from service.commands._common import console, emit, open_store_from_settings, output_mode
from service.commands.workload_flags import (
    CONSTRAINT_FLAGS,
    WORKLOAD_FLAGS,
    RequestOpt,
    pick,
    request_from,
    with_flags,
    workload_fields,
)
from service.schemas import RecommendRequest
from service.settings import get_settings


def render_recommend(r: RecommendResult) -> None:
    rec = r.recommendation
    if rec is None:
        why = "; ".join(f"{g.reason}: {g.count} ({', '.join(g.examples[:3])})" for g in r.rejected)
        console.print("[red]No balanced build meets the job[/red]" + (f" - {why}" if why else "."))
        for note in r.notes:
            console.print(f"[yellow]note:[/yellow] {note}")
    else:
        console.print(f"[bold green]{rec.name}[/bold green] ({rec.build_id}, {rec.origin}): ${rec.price_usd:,.2f}, "
                      f"{rec.hours_per_run:,.2f} h per run, ${rec.energy_per_run_usd:,.2f} energy per run")
        t = Table(title="Parts")
        for col in ("part", "choice", "price", "needs", "why"):
            t.add_column(col)
        for c in rec.components:
            t.add_row(c.category, c.name, f"${c.price_usd:,.2f}" if c.price_usd is not None else "-", c.need, c.why,
                      style=None if c.ok else "red")
        console.print(t)
        if rec.breakeven_runs is not None:
            console.print(f"pays off against the best rental after {rec.breakeven_runs} runs "
                          f"({rec.breakeven_months:.1f} months at {r.runs_per_month:g}/month)")
    if r.best_rental is not None:
        o = r.best_rental
        from service.render.labels import region_label

        console.print(f"best rental: {o.provider}/{region_label(o.region)} {o.instance_type} ({o.gpus_per_node:g}x {o.gpu}): "
                      f"{o.hours:,.2f} h, ${o.cost_usd:,.2f} per run")
    for a in r.alternatives:
        console.print(f"  alternative {a.build_id}: ${a.price_usd:,.2f}, {a.hours_per_run:,.2f} h"
                      + (f" [yellow]short: {'; '.join(a.warnings)}[/yellow]" if a.warnings else ""))


def register(app: typer.Typer) -> None:
    @app.command()
    @with_flags(WORKLOAD_FLAGS, pick(CONSTRAINT_FLAGS, "deadline_hours", "electricity_usd_per_kwh", "electricity_region"))
    def recommend(
        flags: dict[str, Any],
        request: RequestOpt = None,
        budget: Annotated[float | None, typer.Option("--budget", help="most the machine may cost, USD")] = None,
        runs_per_month: Annotated[float | None, typer.Option("--runs-per-month", help="the cadence")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/recommend shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
    ) -> None:
        """Which GPU, CPU, RAM and storage to buy for this job (and budget), next to the best rental."""
        mode = output_mode(as_json, markdown)
        req = request_from(
            request, RecommendRequest, workload_fields(flags),
            {"budget_usd": budget, "deadline_hours": flags.get("deadline_hours"), "runs_per_month": runs_per_month,
             "electricity_usd_per_kwh": flags.get("electricity_usd_per_kwh"),
             "electricity_region": flags.get("electricity_region")},
        )
        result = recommend_answer(req, open_store_from_settings(), get_settings())
        if mode == "markdown":
            from service.render.markdown import recommend_markdown

            sys.stdout.write(recommend_markdown(result))
            return
        emit(result, mode == "json", render_recommend)
