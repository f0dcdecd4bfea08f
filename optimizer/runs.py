"""What a run is to the core: the quote it was planned on, a bill line, and what reconciling them says.

A *planned run* is one run of a job as quoted: the option, its hours and dollars, the snapshot it
was priced on. The user tags the instance with ``gpucost-run-id=<run_id>`` so bill lines can be
matched to it. A *bill line* is one row of a bill, read by ``pricing.billing`` into the same shape
whatever the format (FOCUS, AWS CUR 2.0, GCP billing export). Money on bill lines is ``Decimal``
so totals equal the file's own sums to the cent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from optimizer.results import Option

RUN_TAG = "gpucost-run-id"
RunId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]
Category = Literal["compute", "storage", "egress", "other"]


class PlannedRun(BaseModel):
    """One run as quoted (CONTRACT v3: run_id, team, job, option, quoted_usd, quoted_hours,
    snapshot_id, created_at). ``resource_ids`` and the window let untagged lines match."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    run_id: RunId
    team: Annotated[str, Field(min_length=1, max_length=100)] | None = None
    job: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    option: Option
    quoted_usd: Annotated[float, Field(ge=0, le=1e12)]
    quoted_hours: Annotated[float, Field(ge=0, le=1e6)]
    snapshot_id: Annotated[str, Field(max_length=200)] = ""
    created_at: datetime
    resource_ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=500)]], Field(max_length=100)] = Field(
        default_factory=list, description="instance or volume ids of the run, for bill lines without the tag")
    window_start: datetime | None = Field(default=None, description="resource-id matches start here (default created_at)")
    window_end: datetime | None = Field(default=None, description="resource-id matches end here (default: open)")

    def quoted_part_usd(self, name: str) -> float:
        """The quote's storage or egress dollars for this one run (the option's breakdown is for
        all the quote's runs; ``quoted_usd`` is one run's share of ``cost_usd``)."""
        total = self.option.cost_usd
        part = float(self.option.cost_breakdown.get(name, 0.0))
        return part * self.quoted_usd / total if total > 0 else 0.0


@dataclass(frozen=True, slots=True)
class BillLine:
    """One bill row in the core's terms; ``hours`` are instance-hours on compute lines, else 0."""

    row: int
    billed_usd: Decimal
    effective_usd: Decimal
    start: datetime
    end: datetime
    provider: str
    category: Category
    hours: float = 0.0
    # "gpu": ``hours`` are GPU-hours (GCP bills GPUs per GPU-second), turned into instance-hours
    # with the run's GPUs per node.
    hours_per: Literal["instance", "gpu"] = "instance"
    resource_id: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    service: str = ""
    description: str = ""
    charge_category: str = "Usage"
    covered: bool = False  # usage a commitment (Savings Plan, reservation, CUD) paid for

    @property
    def run_id(self) -> str | None:
        return self.tags.get(RUN_TAG)


class RunDifference(BaseModel):
    """Quoted against billed for one run; the parts add up to ``effective_usd - quoted_usd``."""

    model_config = ConfigDict(defer_build=True)

    hours_usd: float = Field(description="(billed hours - quoted hours) x quoted hourly rate")
    rate_usd: float = Field(description="compute paid - billed hours x quoted hourly rate")
    storage_usd: float = Field(description="storage billed - storage quoted")
    egress_usd: float = Field(description="egress billed - egress quoted")
    other_usd: float = Field(description="everything else: taxes, support, billing increments, setup")


class RunBill(BaseModel):
    model_config = ConfigDict(defer_build=True)

    run_id: str
    team: str | None
    job: str | None = None
    provider: str
    gpu: str
    quoted_usd: float
    billed_usd: float
    effective_usd: float
    quoted_hours: float
    billed_hours: float
    quoted_rate_usd: float = Field(description="quoted USD per wall hour, all nodes")
    billed_rate_usd: float | None = Field(description="compute effective USD per billed wall hour, all nodes")
    differences: RunDifference
    cause: str
    provisional: bool = False
    lines: int = 0
    matched_by: list[str] = Field(default_factory=list, description='"tag" and/or "resource"')


class CalibrationFactor(BaseModel):
    model_config = ConfigDict(defer_build=True)

    provider: str
    gpu: str
    hours_factor: float
    rate_factor: float
    runs: list[str] = Field(description="the reconciled runs the factors were learnt from")
    formula: str = ""


class Reconciliation(BaseModel):
    model_config = ConfigDict(defer_build=True)

    runs: list[RunBill]
    unmatched_usd: float
    billed_total_usd: float
    effective_total_usd: float
    provisional_usd: float
    calibration: list[CalibrationFactor] = Field(default_factory=list)
    unmatched_effective_usd: float = 0.0
    lines: int = 0
    unmatched_lines: int = 0
    unmatched_top: list[dict[str, Any]] = Field(
        default_factory=list, description="the largest unmatched charges, so untagged spend is seen, not dropped")
    currency: str = "USD"
    format: str = ""
    import_id: int | None = None
    already_imported: bool = False
