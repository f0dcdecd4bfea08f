"""Answers the core computes: estimates, options, quotes. Pydantic, so the API and CLI share them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from optimizer.commitments import CommitmentOption


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
    model_config = ConfigDict(frozen=True, defer_build=True)  # shared by the estimate cache

    weights: float
    gradients: float
    optimizer: float
    activations: float
    overhead: float
    total_per_gpu: float
    # Sources report either: torch.cuda.max_memory_allocated (allocator_peak) or what nvidia-smi
    # shows for the process (allocator peak + CUDA context + cached blocks = total_per_gpu).
    allocator_peak: float = 0.0
    nvidia_smi: float = 0.0


class HostNeeds(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # shared by the estimate cache

    ram_gb: float
    cpu_cores: int
    disk_gb: float


class Recipe(BaseModel):
    """How the run is executed on one option: micro-batch x accumulation x data-parallel GPUs."""

    model_config = ConfigDict(frozen=True)  # shared by the estimate cache

    micro_batch_size: int
    gradient_accumulation_steps: int
    gradient_checkpointing: bool | Literal["offload"]
    sharding: str
    data_parallel_gpus: int = 1
    global_batch_size: int = Field(description="sequences per optimizer step as run: micro x accumulation x GPUs")
    requested_global_batch_size: int
    chosen: tuple[str, ...] = Field(default=(), description='fields that were "auto" and chosen here')
    notes: tuple[str, ...] = ()
    precision: str | None = Field(
        default=None, description='the precision the option runs (``auto``: bf16, or fp16 on Volta/Turing)'
    )
    idle_gpus: int = Field(
        default=0, description="GPUs of the option left idle so that the ones used divide global_batch_size (paid for)"
    )

    def label(self) -> str:
        """``4 x 2 x 2 GPUs = 16, checkpointing`` as a one-line summary."""
        gpus = f" x {self.data_parallel_gpus} GPUs" if self.data_parallel_gpus > 1 else ""
        ckpt = ", checkpointing" if self.gradient_checkpointing else ""
        if self.gradient_checkpointing == "offload":
            ckpt += " (offloaded to host RAM)"
        idle = f", {self.idle_gpus} GPU(s) idle" if self.idle_gpus else ""
        return f"{self.micro_batch_size} x {self.gradient_accumulation_steps}{gpus} = {self.global_batch_size}{ckpt}{idle}"


class Suggestion(BaseModel):
    """A change that makes a job fit, verified by estimating it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    text: str
    changes: dict[str, Any] = Field(description="workload fields to change (gpu_count: GPUs to use)")
    gpu_count: int
    total_per_gpu_gb: float
    hours: float
    recipe: Recipe | None = None


# Where an estimate's details keep what makes the figures only a reader sees (the estimator's
# ``ShownDetails``): made when the estimate is serialised or ``all_details`` is read. Its leading "_"
# keeps the key itself out of what is shown, as with the estimator's other own keys.
SHOWN_KEY = "_shown"


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
    samples_per_second: float = Field(default=0.0, description="sequences (images for vision models) per second, all GPUs")
    range: dict[str, list[float]] = Field(
        default_factory=dict,
        description="[low, high] of total_per_gpu (GB) and tokens_per_second: how sure the estimate is",
    )
    warnings: tuple[str, ...] = ()
    recipe: Recipe | None = None
    suggestions: tuple[Suggestion, ...] = ()
    # Where speed and memory come from (optimizer.measured): the model, a measurement of this
    # recipe on this GPU, or one on another GPU scaled by the model's ratio between the two.
    basis: Literal["model", "measured", "scaled"] = "model"
    measurement_id: str | None = None

    @property
    def all_details(self) -> dict[str, Any]:
        """``details`` with the figures made only when shown (the step's seconds, FLOPs per token,
        ...), in the order they are serialised; of the estimator's own "_" keys, the amount's basis
        stays and what made the figures goes."""
        shown = self.details.get(SHOWN_KEY)
        return self.details if shown is None else shown.merged(self.details)  # type: ignore[no-any-return]

    @field_serializer("details")
    def _rounded(self, details: dict[str, Any]) -> dict[str, Any]:
        shown = details.get(SHOWN_KEY)
        if shown is not None:
            details = shown.merged(details)
        # Keys starting with "_" are the estimator's own (``optimizer.estimator.amounts``), not figures.
        return _round_floats({k: v for k, v in details.items() if not k.startswith("_")})  # type: ignore[no-any-return]


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
    outlay_usd: float = Field(
        default=0.0, description="cash paid: the rental bill, or the machines' price plus energy (what a budget caps)"
    )
    machines: int | None = Field(default=None, description="local: machines the runs need within their life")
    utilization: float | None = Field(
        default=None, description="local: share of the machines' hours (730 a month) the runs use over their life"
    )
    recipe: Recipe | None = None
    basis: Literal["model", "measured", "scaled"] = Field(
        default="model", description="hours and memory from the model, a measurement on this GPU, or one scaled from another GPU"
    )
    measurement_id: str | None = None
    warnings: list[str] = Field(
        default_factory=list, description="risks of this option: a fit near the card's size, idle GPUs, ..."
    )
    price_age_days: float | None = Field(default=None, description="age of the price (as_of) when the answer was made")
    quota: Literal["ok", "short", "unknown"] | None = Field(
        default=None, description="cloud: whether the account's quota covers the option; never ok without data"
    )
    quota_detail: dict[str, Any] | None = Field(
        default=None, description="code (the quota to request), need, limit, unit, provider, region (optimizer.quotas)"
    )
    spot_risk: dict[str, Any] | None = Field(
        default=None,
        description="spot: interruptions_per_hour and its source, expected/p50/p90 hours and cost per run "
        "(fallback to on demand counted), p_meets_deadline (optimizer.spot_risk)",
    )
    calibration: dict[str, Any] | None = Field(
        default=None,
        description="hours_factor, rate_factor learnt from reconciled bills for this provider and GPU, "
        "and the runs they came from (optimizer.bill_calibration); already applied to hours and cost",
    )
    commitments: list[CommitmentOption] = Field(
        default_factory=list,
        description="cloud: the offer's reserved / savings-plan / committed-use / capacity-block prices "
        "cheaper than on demand, each with the utilisation above which it pays (optimizer.commitments)",
    )


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
    warnings: list[str] = Field(
        default_factory=list, description="stale or implausible prices, converted currencies, checked at quote time"
    )
    saved_run: dict[str, Any] | None = Field(
        default=None, description="the planned run saved from this quote (save_run) and the tag to put on it")
