"""Request and response models shared by the HTTP API and the CLI (CONTRACT names).

Domain answers (Estimate, Quote, Option ...) live in ``optimizer.results`` and are re-exported
here so both front ends speak one set of models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.estimator.workload import Constraints, Workload
from optimizer.offer import LocalBuild, Offer
from optimizer.results import (
    Estimate,
    HostNeeds,
    MemoryBreakdown,
    Option,
    Quote,
    RejectedGroup,
    SolverInfo,
)
from pricing.status import ProviderStatus
from service.run_schemas import SaveRun

__all__ = [
    "BreakevenRequest",
    "BuyTarget",
    "Constraints",
    "Estimate",
    "EstimateRequest",
    "HostNeeds",
    "JobSpec",
    "LeaseStatus",
    "LocalBuild",
    "MemoryBreakdown",
    "Offer",
    "OffersResponse",
    "Option",
    "PlanRequest",
    "ProviderStatus",
    "PricesStatus",
    "Quote",
    "QuoteRequest",
    "RecommendRequest",
    "RefreshRun",
    "RejectedGroup",
    "RentTarget",
    "SolverInfo",
    "Workload",
]


MAX_PLAN_JOBS = 500


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    workload: Workload
    gpu: Annotated[str, Field(min_length=1, max_length=100)] = "A100-80GB"
    gpu_count: Annotated[int, Field(ge=1, le=4096)] = 1


class QuoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Workload
    constraints: Constraints = Field(default_factory=Constraints)
    runs: Annotated[int, Field(ge=1, le=100_000)] = 1
    top: Annotated[int, Field(ge=1, le=1000)] = 10
    # Save the best option as a planned run (``gpucost runs``); the quote says how to tag it.
    save_run: SaveRun | None = None
    # Apply the hours and rate factors learnt from reconciled bills (``gpucost reconcile``).
    use_calibration: bool = True


class RentTarget(BaseModel):
    """Either a GPU (cheapest matching offer) or a provider's instance type."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    gpu: Annotated[str, Field(max_length=100)] | None = None
    provider: Annotated[str, Field(max_length=100)] | None = None
    instance_type: Annotated[str, Field(max_length=200)] | None = None
    region: Annotated[str, Field(max_length=100)] | None = None
    spot: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> RentTarget:
        if self.gpu is None and self.instance_type is None:
            raise ValueError("give gpu, or provider and instance_type")
        if self.instance_type is not None and self.provider is None:
            raise ValueError("instance_type needs provider")
        return self


class BuyTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    gpu: Annotated[str, Field(max_length=100)] | None = None
    build: Annotated[str, Field(max_length=200)] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> BuyTarget:
        if (self.gpu is None) == (self.build is None):
            raise ValueError("give exactly one of gpu or build")
        return self


class BreakevenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    workload: Workload
    rent: RentTarget
    buy: BuyTarget
    runs_per_month: Annotated[float, Field(gt=0, le=10_000)] = 4
    horizon_months: Annotated[int, Field(ge=1, le=120)] = 36
    electricity_usd_per_kwh: Annotated[float, Field(ge=0, le=10)] | None = None
    electricity_region: Annotated[str, Field(min_length=1, max_length=64)] | None = None


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: Annotated[str, Field(min_length=1, max_length=200)]
    workload: Workload
    runs_per_month: Annotated[float, Field(ge=0, le=10_000)] = 1
    deadline_hours: Annotated[float, Field(gt=0, le=100_000)] | None = None
    start_month: Annotated[int, Field(ge=0, le=120)] = 0
    # Whose budget the job's spend counts against (``constraints.team_budgets``).
    team: Annotated[str, Field(min_length=1, max_length=100)] | None = None


class PlanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    # Bounded so one request cannot hold a worker for long (each job is priced on every offer).
    jobs: Annotated[list[JobSpec], Field(min_length=1, max_length=MAX_PLAN_JOBS)]
    horizon_months: Annotated[int, Field(ge=1, le=120)] = 12
    constraints: Constraints = Field(default_factory=Constraints)
    capex_budget_usd: Annotated[float, Field(ge=0, le=1e12)] | None = None
    time_limit_s: Annotated[float, Field(gt=0, le=600)] = 30
    # Commit instances for a term (reserved, savings plan) where a rental offers terms (docs/commitments.md).
    allow_commitments: bool = True
    # True: a term longer than what is left of the horizon is charged only for the horizon's months
    # (it can be resold or used by other work); false: in full.
    commitment_value_after_horizon: bool = False

    @model_validator(mode="after")
    def _unique_names(self) -> PlanRequest:
        names = [j.name for j in self.jobs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"job names must be unique (repeated: {', '.join(dupes)})")
        return self


class RecommendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    workload: Workload
    budget_usd: Annotated[float, Field(gt=0, le=1e9)] | None = None
    deadline_hours: Annotated[float, Field(gt=0, le=100_000)] | None = None
    runs_per_month: Annotated[float, Field(gt=0, le=10_000)] = 4
    electricity_usd_per_kwh: Annotated[float, Field(ge=0, le=10)] | None = None
    electricity_region: Annotated[str, Field(min_length=1, max_length=64)] | None = None


class OffersResponse(BaseModel):
    model_config = ConfigDict(defer_build=True)

    offers: list[Offer]


class LeaseStatus(BaseModel):
    """The refresh lease: who refreshes now, since when, and its last heartbeat."""

    model_config = ConfigDict(defer_build=True)

    holder: str
    acquired_at: datetime | None
    heartbeat_at: datetime | None
    expires_at: datetime
    alive: bool


class RefreshRun(BaseModel):
    model_config = ConfigDict(defer_build=True)

    source: str
    holder: str
    started_at: datetime
    finished_at: datetime | None
    status: Literal["running", "aborted", "updated", "unchanged", "failed", "skipped"]
    detail: str | None = None


class PricesStatus(BaseModel):
    model_config = ConfigDict(defer_build=True)

    providers: list[ProviderStatus]
    lease: LeaseStatus | None = None
    runs: list[RefreshRun] = Field(default_factory=list, description="latest refresh attempts, newest first")
    problems: list[str] = Field(default_factory=list, description="damage found in the store; empty when whole")


Format = Literal["json", "markdown", "table"]
