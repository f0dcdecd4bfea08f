"""Answers the core computes: estimates, options, quotes. Pydantic, so the API and CLI share them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer


def _round_floats(value: Any, digits: int = 4) -> Any:
    """Floats in nested dicts and lists rounded for display (large counts keep their digits)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_round_floats(v, digits) for v in value]
    return value


class MemoryBreakdown(BaseModel):
    model_config = ConfigDict(frozen=True)  # shared by the estimate cache

    weights: float
    gradients: float
    optimizer: float
    activations: float
    overhead: float
    total_per_gpu: float


class HostNeeds(BaseModel):
    model_config = ConfigDict(frozen=True)  # shared by the estimate cache

    ram_gb: float
    cpu_cores: int
    disk_gb: float


class Estimate(BaseModel):
    model_config = ConfigDict(frozen=True)  # shared by the estimate cache

    params: int
    trainable_params: int
    memory_gb: MemoryBreakdown
    gpu: str
    gpu_count: int
    gpu_vram_gb: float
    fits: bool
    sharding: str
    train_flops: float
    tokens_per_second: float
    mfu: float
    hours: float
    host: HostNeeds
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = Field(default_factory=dict)

    @field_serializer("details")
    def _rounded(self, details: dict[str, Any]) -> dict[str, Any]:
        return _round_floats(details)  # type: ignore[no-any-return]


class Option(BaseModel):
    kind: Literal["cloud", "local"]
    provider: str
    region: str | None
    instance_type: str
    gpu: str
    gpus_per_node: float
    nodes: int
    pricing: Literal["on_demand", "spot", "purchase"]
    hourly_usd: float
    hours: float
    cost_usd: float
    memory_need_gb_per_gpu: float
    vram_gb_per_gpu: float
    sharding: str
    cost_breakdown: dict[str, float] = Field(default_factory=dict)
    zone: str | None = None
    source: str | None = None
    as_of: datetime | None = None


class RejectedGroup(BaseModel):
    reason: str
    count: int
    examples: list[str] = Field(default_factory=list)


class SolverInfo(BaseModel):
    name: str
    status: str
    seconds: float
    gap: float | None = None
    time_limit_s: float | None = None


class Quote(BaseModel):
    best: Option | None
    options: list[Option]
    rejected: list[RejectedGroup]
    prices_as_of: dict[str, datetime]
    snapshot_id: str
    solver: SolverInfo
    fastest: Option | None = None
    runs: int = 1
    estimate: dict[str, Any] | None = None
