"""``gpucost runs add --request FILE | list [--json]``: planned runs (what was quoted for each run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.commands._common import emit, load_request, open_store_from_settings


def _render_runs(doc: dict[str, list[dict[str, object]]]) -> None:
    from rich.table import Table

    from service.commands._common import console

    table = Table(title="Planned runs")
    for col in ("run_id", "team", "job", "option", "quoted $", "quoted h", "created"):
        table.add_column(col)
    for r in doc["runs"]:
        o = r["option"]
        assert isinstance(o, dict)
        table.add_row(str(r["run_id"]), str(r["team"] or "-"), str(r["job"] or "-"),
                      f"{o['provider']}/{o['region']} {o['instance_type']}", f"{r['quoted_usd']:,.2f}",
                      f"{r['quoted_hours']:,.2f}", str(r["created_at"])[:16])
    console.print(table)
    console.print("Tag each run's instance gpucost-run-id=<run_id> so `gpucost reconcile` matches its bill lines.")


def register(app: typer.Typer) -> None:
    runs = typer.Typer(help="Planned runs: what was quoted for each run, to compare with the bill.",
                       no_args_is_help=True)
    app.add_typer(runs, name="runs")

    @runs.command("add")
    def add(
        request: Annotated[Path, typer.Option("--request", "-r", help="run JSON: run_id, team, job and option "
                                              "(a quote option) or quote (a quote request)")],
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the POST /v1/runs shape)")] = False,
    ) -> None:
        """Save a planned run (a quoted option, or the best option of a quote request)."""
        from service.bills import add_run_answer
        from service.run_schemas import RunRequest, saved_note

        req = load_request(request, RunRequest)
        run = add_run_answer(req, open_store_from_settings())
        if as_json:
            emit(run, True)
        else:
            typer.echo(f"saved run {run.run_id}: ${run.quoted_usd:,.2f}, {run.quoted_hours:,.2f} h on "
                       f"{run.option.provider} {run.option.instance_type}")
            typer.echo(saved_note(run).note)

    @runs.command("list")
    def list_(
        team: Annotated[str | None, typer.Option("--team", help="only this team's runs")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print JSON (the GET /v1/runs shape)")] = False,
    ) -> None:
        """The planned runs, oldest first."""
        from service.bills import list_runs_answer
        from service.run_schemas import RunsResponse

        doc = RunsResponse(runs=list_runs_answer(open_store_from_settings(), team))
        emit(doc, as_json, lambda d: _render_runs(d.model_dump(mode="json")))
