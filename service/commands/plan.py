from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from optimizer.plan import PlanResult
from service.answers import plan_answer
from service.render.commitments import term_label
from service.commands._common import (
    console,
    emit,
    load_request,
    open_store_from_settings,
    output_mode,
    parse_request,
    write_charts,
)
from service.commands.progress import progress_line
from service.commands.workload_flags import CONSTRAINT_FLAGS, constraint_fields, pick, with_flags
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
    if p.commit:
        t = Table(title="Commit (paid whether used or not)")
        for col in ("start month", "where", "term", "count", "effective $/h", "cost"):
            t.add_column(col)
        for c in p.commit:
            t.add_row(str(c.start_month + 1), f"{c.provider}/{c.region or '-'} {c.instance_type}",
                      term_label(c.kind, c.term_months, c.payment, c.offering_class), str(c.count),
                      f"${c.effective_hourly_usd:,.4f}", _usd(c.cost_usd))
        console.print(t)
    if p.all_cloud_committed_cost_usd is not None:
        console.print(f"all cloud, committing where it pays {_usd(p.all_cloud_committed_cost_usd)}")
    t = Table(title="Where the runs go")
    for col in ("month", "job", "where", "GPU", "pricing", "runs", "hours/run", "cost"):
        t.add_column(col)
    # As the Markdown: a stretch of months that run a job the same way is one row; a job's name is
    # the user's text, so it is shown, never read as rich markup.
    from rich.markup import escape

    from service.render.labels import pricing_label, region_label
    from service.render.markdown import collapse_months

    by_job: dict[str, list[tuple[int, tuple[object, ...]]]] = {}
    for a in sorted(p.assignments, key=lambda a: (a.job, a.month)):
        by_job.setdefault(a.job, []).append((a.month + 1, (
            f"local build {a.instance_type}" if a.kind == "local"
            else f"{a.provider}/{region_label(a.region)} {a.instance_type}",
            a.gpu, pricing_label(a.pricing), str(a.runs),
            f"{a.hours_per_run:,.2f}", _usd(a.cost_usd))))
    for job, months in by_job.items():
        for row in collapse_months(months):
            t.add_row(str(row[0]), escape(job), *(escape(str(c)) for c in row[1:]))
    console.print(t)
    for u in p.unplaced:
        console.print(f"[red]{escape(u.job)} cannot run anywhere:[/red] " + "; ".join(f"{g.reason}: {g.count}" for g in u.rejected))


def register(app: typer.Typer) -> None:
    @app.command()
    @with_flags(pick(CONSTRAINT_FLAGS, "gpu", "provider", "region", "spot", "local", "max_gpus",
                     "electricity_usd_per_kwh", "electricity_region"))
    def plan(
        flags: dict[str, Any],
        request: Annotated[Path, typer.Option("--request", "-r", help="plan request JSON file (- reads standard input)")],
        horizon_months: Annotated[int | None, typer.Option("--horizon-months", min=1, help="months to plan")] = None,
        capex_budget: Annotated[
            float | None, typer.Option("--capex-budget", min=0, help="most to spend on machines, USD")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the /v1/plan shape)")] = False,
        markdown: Annotated[bool, typer.Option("--markdown", help="print Markdown")] = False,
        png: Annotated[Path | None, typer.Option("--png", help="write the monthly-cost chart as PNG")] = None,
        svg: Annotated[Path | None, typer.Option("--svg", help="write the chart as SVG")] = None,
    ) -> None:
        """A team's jobs over a horizon: machines to buy and when, where each run goes, cost per month.

        Constraint flags update the request file's constraints.
        """
        mode = output_mode(as_json, markdown)
        req = load_request(request, PlanRequest)
        overrides = {"horizon_months": horizon_months, "capex_budget_usd": capex_budget}
        overrides = {k: v for k, v in overrides.items() if v is not None}
        constraints = constraint_fields(flags)
        if constraints or overrides:
            data = req.model_dump(exclude_unset=True)
            data["constraints"] = {**data.get("constraints", {}), **constraints}
            req = parse_request({**data, **overrides}, PlanRequest)
        jobs = len(req.jobs)
        with progress_line(f"planning {jobs} job{'s' if jobs != 1 else ''} over {req.horizon_months} months:"):
            result = plan_answer(req, open_store_from_settings())
        if png or svg:
            from service.render.charts import plan_chart  # matplotlib: only when asked

            write_charts(lambda fmt: plan_chart(result, fmt), png, svg)
        if mode == "markdown":
            from service.render.markdown import plan_markdown

            chart = str(png) if png else (str(svg) if svg else None)
            sys.stdout.write(plan_markdown(result, chart))
            return
        emit(result, mode == "json", render_plan)
