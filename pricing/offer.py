"""What a price source yields: cloud ``Offer`` rows and purchasable ``LocalBuild`` machines.

Every row carries ``source`` and ``as_of``. Prices are per instance-hour (offers) or per machine
(builds), in USD, with the source's own currency and figure kept beside them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Offer(BaseModel):
    model_config = ConfigDict(extra="forbid")

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

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.provider, self.region, self.zone or "", self.instance_type)


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    model_config = ConfigDict(extra="forbid")

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
