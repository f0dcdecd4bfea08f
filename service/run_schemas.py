"""Requests and answers of runs, reconciliation and spend (CONTRACT v3 "Runs, reconciliation, spend")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.results import Option
from optimizer.runs import RUN_TAG, CalibrationFactor, PlannedRun, RunId

TeamName = Annotated[str, Field(min_length=1, max_length=100)]
ResourceIds = Annotated[list[Annotated[str, Field(min_length=1, max_length=500)]], Field(max_length=100)]


class SaveRun(BaseModel):
    """``save_run`` on a quote request: save the quote's best option as a planned run."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    run_id: RunId
    team: TeamName | None = None
    job: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    resource_ids: ResourceIds = Field(default_factory=list)


class RunRequest(BaseModel):
    """``POST /v1/runs`` / ``gpucost runs add``: a planned run as the contract names it, or a quote
    request (``quote``) whose best option becomes the run."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    run_id: RunId
    team: TeamName | None = None
    job: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    option: Option | None = None
    quote: dict[str, Any] | None = Field(default=None, description="a quote request; its best option is saved")
    quoted_usd: Annotated[float, Field(ge=0, le=1e12)] | None = None
    quoted_hours: Annotated[float, Field(ge=0, le=1e6)] | None = None
    snapshot_id: Annotated[str, Field(max_length=200)] = ""
    created_at: datetime | None = None
    resource_ids: ResourceIds = Field(default_factory=list)
    window_start: datetime | None = None
    window_end: datetime | None = None

    @model_validator(mode="after")
    def _one_of(self) -> RunRequest:
        if (self.option is None) == (self.quote is None):
            raise ValueError("give exactly one of option or quote")
        for name in ("created_at", "window_start", "window_end"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} needs a time zone (e.g. 2026-12-01T10:00:00Z)")
        return self


class SavedRunNote(BaseModel):
    model_config = ConfigDict(defer_build=True)

    run_id: str
    team: str | None
    tag: dict[str, str]
    note: str


def saved_note(run: PlannedRun) -> SavedRunNote:
    return SavedRunNote(
        run_id=run.run_id, team=run.team, tag={RUN_TAG: run.run_id},
        note=f"Tag the instance (and its disks) {RUN_TAG}={run.run_id} and enable the tag as a cost "
        "allocation tag, so the bill's lines can be matched to this run by `gpucost reconcile`.",
    )


class RunsResponse(BaseModel):
    model_config = ConfigDict(defer_build=True)

    runs: list[PlannedRun]


class SpendResponse(BaseModel):
    """``GET /v1/spend`` as JSON: rows with FOCUS column names (``x_`` columns are gpucost's)."""

    model_config = ConfigDict(defer_build=True)

    by: str
    rows: list[dict[str, Any]]


class CalibrationResponse(BaseModel):
    model_config = ConfigDict(defer_build=True)

    calibration: list[CalibrationFactor]
