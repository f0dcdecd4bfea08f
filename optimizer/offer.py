"""What a price source yields: cloud ``Offer`` rows and purchasable ``LocalBuild`` machines.

Every row carries ``source`` and ``as_of``. Prices are per instance-hour (offers) or per machine
(builds), in USD, with the source's own currency and figure kept beside them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Instance types sold with a fabric for multi-node training (EFA, GPUDirect, InfiniBand), as each
# provider documents them: AWS p3dn/p4d/p4de/p5/p5e/p5en/p6 full-size instances (EFA); GCP
# a2-highgpu/megagpu/ultragpu and a3/a4 8- and 16-GPU types (high-bandwidth / GPUDirect
# networking); Azure ND-series "r" sizes (InfiniBand: ND40rs_v2, ND96asr_v4, ND96amsr_A100_v4,
# ND96isr_H100_v5, ND96isr_H200_v5); Nebius 8-GPU H100/H200/B200 nodes (InfiniBand clusters).
_FABRIC_PATTERNS: dict[str, re.Pattern[str]] = {
    "aws": re.compile(r"^(p3dn|p4d|p4de|p5|p5e|p5en|p6-[a-z0-9]+)\.(24|48)xlarge$"),
    "gcp": re.compile(r"^(a2-(highgpu|ultragpu)-8g|a2-megagpu-16g|a3-[a-z]+gpu-8g|a4-[a-z]+-8g)"),
    "azure": re.compile(r"^Standard_ND\d+[a-z]*r[a-z]*_", re.IGNORECASE),
    "nebius": re.compile(r"_8gpu-"),
}


def has_inter_node_fabric(provider: str, instance_type: str) -> bool:
    """Whether the provider sells ``instance_type`` with a multi-node training fabric."""
    pattern = _FABRIC_PATTERNS.get(provider.lower())
    return bool(pattern and pattern.search(instance_type))


def _storage_default(data: dict[str, Any]) -> float | None:
    from optimizer.storage_prices import block_storage_usd_per_gb_month

    return block_storage_usd_per_gb_month(str(data.get("provider", "")))


def _fabric_default(data: dict[str, Any]) -> bool:
    # Derived from the type when not given, so rows stored without the column read back right.
    return has_inter_node_fabric(str(data.get("provider", "")), str(data.get("instance_type", "")))


# Hours in a month as AWS counts them for reserved terms (8,760 h a year / 12), so an effective
# rate is hourly + upfront / (term_months * 730), as ec2instances.info and AWS's calculator show.
HOURS_PER_MONTH = 730.0

CommitmentKind = Literal["reserved", "savings_plan", "cud", "capacity_block", "azure_reservation"]
PaymentOption = Literal["no_upfront", "partial_upfront", "all_upfront"]


class Commitment(BaseModel):
    """A price for committing to an instance for a term (CONTRACT v3 ``commitments``).

    Prices are per instance-hour in USD. ``upfront_usd`` and ``hourly_usd`` are None where the
    source gives only the effective rate; ``effective_hourly_usd`` is always known: hourly plus
    the upfront spread over every hour of the term, paid whether the instance runs or not.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    kind: CommitmentKind
    term_months: Annotated[float, Field(gt=0, description="a capacity block's days as a share of 730 h")]
    payment: PaymentOption
    upfront_usd: Annotated[float, Field(ge=0)] | None = None
    hourly_usd: Annotated[float, Field(ge=0)] | None = None
    effective_hourly_usd: Annotated[float, Field(gt=0)]
    # "standard" | "convertible" for AWS reserved instances; the plan family for savings plans.
    offering_class: str | None = None
    # A capacity block's first hour (a dated reservation); None for terms that start on purchase.
    starts_at: datetime | None = None
    source: str
    as_of: datetime

    @property
    def term_hours(self) -> float:
        return self.term_months * HOURS_PER_MONTH


class Offer(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    provider: str
    region: str
    zone: str | None = None
    instance_type: str
    gpu: str
    gpu_count: Annotated[float, Field(gt=0, description="fractional for GPU partitions (g6f)")]
    gpu_vram_gb: Annotated[float, Field(gt=0, description="per GPU (or per partition)")]
    vcpus: float | None = None
    ram_gb: float | None = None
    price_hour: Annotated[float, Field(gt=0)] | None = None
    spot_price_hour: Annotated[float, Field(gt=0)] | None = None
    currency: str = "USD"
    price_hour_native: float | None = None
    spot_price_hour_native: float | None = None
    billing_increment_s: Annotated[int, Field(ge=1)] = 1
    min_billing_s: Annotated[int, Field(ge=0)] = 60
    interconnect: str | None = None  # "nvlink" | "pcie" between the GPUs of one instance
    source: str
    as_of: datetime
    # EFA / InfiniBand / GPUDirect between instances: what data-parallel training over several
    # nodes needs to run at the estimated speed.
    inter_node_fabric: bool = Field(default_factory=_fabric_default)
    # The provider's block-storage price (optimizer.storage_prices) for the job's disk; None: none
    # charged (included in the instance price, or unknown).
    storage_usd_per_gb_month: Annotated[float, Field(ge=0)] | None = Field(default_factory=_storage_default)
    # Reserved / savings-plan / committed-use / capacity-block prices of this instance (v3).
    commitments: list[Commitment] = Field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.provider, self.region, self.zone or "", self.instance_type)


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str
    category: str  # gpu cpu board ram psu storage case cooler
    name: str
    price_usd: Annotated[float, Field(ge=0)]
    currency: str = "USD"
    price_native: float | None = None
    condition: str = "new"
    source: str
    as_of: datetime
    specs: dict[str, float | str] = Field(default_factory=dict)


class LocalBuild(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str
    name: str
    tier: str = ""
    gpu: str
    gpu_count: Annotated[int, Field(ge=1)]
    gpu_vram_gb: float
    cpu: str
    cpu_cores: Annotated[int, Field(ge=1)]
    ram_gb: Annotated[float, Field(gt=0)]
    storage: str
    storage_gb: float = 2000
    storage_read_mbs: float = 5000
    psu_w: float
    parts: list[Part] = Field(default_factory=list)
    price_usd: Annotated[float, Field(gt=0, description="capex: parts total")]
    load_power_w: Annotated[float, Field(gt=0)]
    idle_power_w: Annotated[float, Field(ge=0)]
    lifetime_months: Annotated[int, Field(ge=1)] = 36
    resale_fraction: Annotated[
        float, Field(ge=0, le=1, description="share of price recovered at the end of lifetime")
    ] = 0.35
    lead_time_days: Annotated[float, Field(ge=0)] = 7
    electricity_usd_per_kwh: Annotated[float, Field(ge=0)] = 0.1598
    electricity_source: str = ""
    currency: str = "USD"
    source: str
    as_of: datetime
