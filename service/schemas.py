"""Request and response models shared by the HTTP API and the CLI (CONTRACT names).

Domain answers (Estimate, Quote, Option ...) live in ``optimizer.results`` and are re-exported
here so both front ends speak one set of models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from optimizer.results import (
    Estimate,
    HostNeeds,
    MemoryBreakdown,
    Option,
    Quote,
    RejectedGroup,
    SolverInfo,
)
from optimizer.estimator.workload import Constraints, Workload
from pricing.offer import LocalBuild, Offer

__all__ = [
    "BreakevenRequest",
    "BuyTarget",
    "Constraints",
    "Estimate",
    "EstimateRequest",
    "HostNeeds",
    "JobSpec",
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
    "RejectedGroup",
    "RentTarget",
    "SolverInfo",
    "Workload",
]


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Workload
    gpu: str = "A100-80GB"
    gpu_count: Annotated[int, Field(ge=1, le=4096)] = 1


class QuoteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Workload
    constraints: Constraints = Field(default_factory=Constraints)
    runs: Annotated[int, Field(ge=1, le=100_000)] = 1
    top: Annotated[int, Field(ge=1, le=1000)] = 10


class RentTarget(BaseModel):
    """Either a GPU (cheapest matching offer) or a provider's instance type."""

    model_config = ConfigDict(extra="forbid")

    gpu: str | None = None
    provider: str | None = None
    instance_type: str | None = None
    region: str | None = None
    spot: bool = False

    @model_validator(mode="after")
    def _one_of(self) -> RentTarget:
        if self.gpu is None and self.instance_type is None:
            raise ValueError("give gpu, or provider and instance_type")
        if self.instance_type is not None and self.provider is None:
            raise ValueError("instance_type needs provider")
        return self


class BuyTarget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gpu: str | None = None
    build: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> BuyTarget:
        if (self.gpu is None) == (self.build is None):
            raise ValueError("give exactly one of gpu or build")
        return self


class BreakevenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Workload
    rent: RentTarget
    buy: BuyTarget
    runs_per_month: Annotated[float, Field(gt=0, le=10_000)] = 4
    horizon_months: Annotated[int, Field(ge=1, le=120)] = 36
    electricity_usd_per_kwh: Annotated[float, Field(ge=0, le=10)] | None = None


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    workload: Workload
    runs_per_month: Annotated[float, Field(ge=0, le=10_000)] = 1
    deadline_hours: Annotated[float, Field(gt=0, le=100_000)] | None = None
    start_month: Annotated[int, Field(ge=0, le=120)] = 0


class PlanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: Annotated[list[JobSpec], Field(min_length=1, max_length=1000)]
    horizon_months: Annotated[int, Field(ge=1, le=120)] = 12
    constraints: Constraints = Field(default_factory=Constraints)
    capex_budget_usd: Annotated[float, Field(ge=0, le=1e12)] | None = None
    time_limit_s: Annotated[float, Field(gt=0, le=600)] = 30

    @model_validator(mode="after")
    def _unique_names(self) -> PlanRequest:
        names = [j.name for j in self.jobs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"job names must be unique (repeated: {', '.join(dupes)})")
        return self


class RecommendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workload: Workload
    budget_usd: Annotated[float, Field(gt=0, le=1e9)] | None = None
    deadline_hours: Annotated[float, Field(gt=0, le=100_000)] | None = None
    runs_per_month: Annotated[float, Field(gt=0, le=10_000)] = 4


class OffersResponse(BaseModel):
    offers: list[Offer]


class ProviderStatus(BaseModel):
    provider: str
    rows: int
    as_of: datetime | None
    last_attempt: datetime | None
    last_error: str | None
    stale: bool
    age_hours: float | None = None
    snapshot_id: str | None = None


class PricesStatus(BaseModel):
    providers: list[ProviderStatus]


Format = Literal["json", "markdown", "table"]
