from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from optimizer.plan import PlanResult
from service.answers import plan_answer
from service.commands._common import console, emit, load_request, open_store_from_settings
from service.schemas import PlanRequest


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def render_plan(p: PlanResult) -> None:
    console.print(f"solver {p.solver.name}: [bold]{p.solver.status}[/bold] in {p.solver.seconds:.2f} s")
    console.print(f"total {_usd(p.total_cost_usd)} · all cloud {_usd(p.all_cloud_cost_usd)} · "
                  f"all local {_usd(p.all_local_cost_usd)} over {p.horizon_months} months")
    if p.buy:
        t = Table(title="Buy")
        for col in ("month", "build", "count", "price each"):
            t.add_column(col)
        for b in p.buy:
            t.add_row(str(b.month + 1), f"{b.build} ({b.name})", str(b.count), _usd(b.price_usd))
        console.print(t)
    else:
        console.print("buy nothing")
    t = Table(title="Where the runs go")
    for col in ("month", "job", "where", "GPU", "pricing", "runs", "hours/run", "cost"):
        t.add_column(col)
    for a in p.assignments:
        t.add_row(str(a.month + 1), a.job, f"{a.provider}/{a.region or '-'} {a.instance_type}", a.gpu, a.pricing,
                  str(a.runs), f"{a.hours_per_run:,.2f}", _usd(a.cost_usd))
    console.print(t)
    for u in p.unplaced:
        console.print(f"[red]{u.job} cannot run anywhere:[/red] " + "; ".join(f"{g.reason}: {g.count}" for g in u.rejected))


def register(app: typer.Typer) -> None:
    @app.command()
    def plan(
        request: Annotated[Path, typer.Option("--request", "-r", help="plan request JSON file")],
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/plan shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
    ) -> None:
        """A team's jobs over a horizon: machines to buy and when, where each run goes, cost per month."""
        req = load_request(request, PlanRequest)
        result = plan_answer(req, open_store_from_settings())
        if markdown and not as_json:
            from service.render.markdown import plan_markdown

            sys.stdout.write(plan_markdown(result))
            return
        emit(result, as_json, render_plan)
