"""Planned runs, bill reconciliation (admin) and spend exports."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Query, Request, Response

from optimizer.errors import InvalidInput
from optimizer.runs import PlannedRun, Reconciliation
from service.api.deps import AdminDep, StoreDep
from service.api.negotiate import chosen_format
from service.bills import (
    SPEND_BY,
    add_run_answer,
    list_runs_answer,
    parse_rates,
    reconcile_answer,
    spend_csv,
    spend_parquet,
    spend_rows,
)
from service.run_schemas import CalibrationResponse, RunRequest, RunsResponse, SpendResponse

router = APIRouter(prefix="/v1", tags=["runs"])


@router.post("/runs", response_model=PlannedRun, status_code=201)
def add_run(request: RunRequest, store: StoreDep) -> PlannedRun:
    """Save a planned run: an option as quoted, or a quote request whose best option is saved.
    Tag the instance ``gpucost-run-id=<run_id>`` so its bill lines match it."""
    return add_run_answer(request, store)


@router.get("/runs", response_model=RunsResponse)
def get_runs(store: StoreDep, team: Annotated[str | None, Query(max_length=100)] = None) -> RunsResponse:
    return RunsResponse(runs=list_runs_answer(store, team))


@router.post(
    "/reconcile", response_model=Reconciliation,
    responses={401: {"description": "no admin token"}, 403: {"description": "wrong token or admin disabled"},
               200: {"content": {"text/markdown": {}}}},
)
async def post_reconcile(
    _: AdminDep,
    store: StoreDep,
    http: Request,
    format: Annotated[Literal["focus", "cur2", "gcp-billing"] | None, Query(
        description="the bill's layout; default: told from its columns")] = None,
    rate: Annotated[list[str] | None, Query(max_length=50, description="CUR=USD_PER_UNIT for non-USD bills")] = None,
    now: Annotated[datetime | None, Query(description="read the bill as of this time (billing lag); default now")] = None,
) -> Reconciliation | Response:
    """The bill file as the body (CSV or Parquet, at most the server's body limit): stored whole
    or not at all, matched to the runs, with per-run differences, totals and learnt calibration.
    ``Accept: text/markdown`` answers the Markdown table."""
    if now is not None and now.tzinfo is None:
        raise InvalidInput("query.now", "needs a time zone (e.g. 2026-12-01T00:00:00Z)")
    data = await http.body()
    rates = parse_rates(rate, "query.rate")
    result = await anyio.to_thread.run_sync(lambda: reconcile_answer(data, format, store, rates=rates, now=now))
    if chosen_format(None, http, ("json", "markdown")) == "markdown":
        from service.render.reconcile_markdown import reconcile_markdown

        return Response(reconcile_markdown(result), media_type="text/markdown")
    return result


@router.get("/spend", response_model=SpendResponse, responses={200: {"content": {"text/csv": {}, "application/vnd.apache.parquet": {}}}})
def get_spend(
    store: StoreDep,
    by: Annotated[Literal["team", "month", "run", "team-month"], Query(description=f"one of {', '.join(SPEND_BY)}")] = "team",
    format: Annotated[Literal["json", "csv", "parquet"], Query()] = "json",
) -> SpendResponse | Response:
    """Planned and billed spend per team, month or run, with FOCUS column names (what the page's
    "quoted vs billed" view reads: ``x_PlannedCost`` against ``BilledCost``)."""
    rows = spend_rows(store, by)
    if format == "csv":
        return Response(spend_csv(rows), media_type="text/csv")
    if format == "parquet":
        return Response(spend_parquet(rows), media_type="application/vnd.apache.parquet")
    return SpendResponse(by=by, rows=rows)


@router.get("/calibration", response_model=CalibrationResponse)
def get_calibration(store: StoreDep) -> CalibrationResponse:
    """The hours and rate factors later quotes apply, per provider and GPU, with their runs."""
    from pricing.store.runs import calibration

    return CalibrationResponse(calibration=calibration(store))
