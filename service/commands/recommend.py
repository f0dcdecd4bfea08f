from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.table import Table

from optimizer.recommend import RecommendResult
from service.answers import recommend_answer
from service.commands._common import console, emit, open_store_from_settings
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
        console.print(f"best rental: {o.provider}/{o.region} {o.instance_type} ({o.gpus_per_node:g}x {o.gpu}): "
                      f"{o.hours:,.2f} h, ${o.cost_usd:,.2f} per run")
    for a in r.alternatives:
        console.print(f"  alternative {a.build_id}: ${a.price_usd:,.2f}, {a.hours_per_run:,.2f} h"
                      + (f" [yellow]short: {'; '.join(a.warnings)}[/yellow]" if a.warnings else ""))


def register(app: typer.Typer) -> None:
    @app.command()
    def recommend(
        request: RequestOpt = None,
        model: ModelOpt = None,
        method: MethodOpt = None,
        micro_batch_size: BatchOpt = None,
        seq_len: SeqOpt = None,
        gradient_checkpointing: CkptOpt = None,
        tokens: TokensOpt = None,
        budget: Annotated[float | None, typer.Option("--budget", help="most the machine may cost, USD")] = None,
        deadline_hours: Annotated[float | None, typer.Option("--deadline-hours")] = None,
        runs_per_month: Annotated[float | None, typer.Option("--runs-per-month")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/recommend shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
    ) -> None:
        """Which GPU, CPU, RAM and storage to buy for this job (and budget), next to the best rental."""
        req = request_from(
            request, RecommendRequest,
            dict(model=model, method=method, micro_batch_size=micro_batch_size, seq_len=seq_len,
                 gradient_checkpointing=gradient_checkpointing, tokens=tokens),
            {"budget_usd": budget, "deadline_hours": deadline_hours, "runs_per_month": runs_per_month},
        )
        result = recommend_answer(req, open_store_from_settings(), get_settings())
        if markdown and not as_json:
            from service.render.markdown import recommend_markdown

            sys.stdout.write(recommend_markdown(result))
            return
        emit(result, as_json, render_recommend)
