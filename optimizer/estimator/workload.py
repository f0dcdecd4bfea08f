"""The Workload: what is trained, how, and for how long (CONTRACT "Workload").

Pure value objects. The model may be a preset name, explicit dimensions, or a Hugging Face
``config.json``; it is resolved to a ``ModelShape`` by ``optimizer.estimator.shapes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Method = Literal["full", "lora", "qlora"]
Precision = Literal["fp32", "fp16", "bf16", "bf16-true"]
OptimizerName = Literal["adamw", "adamw_8bit", "sgd"]
Sharding = Literal["ddp", "zero1", "zero2", "zero3", "fsdp", "auto"]
LoraTargets = Literal["attention", "all-linear"]

# Largest amount of training we accept: 1e14 tokens is ~7x Llama-3's pre-training run.
MAX_TOKENS = 1e14


class ModelDims(BaseModel):
    """A model given by its size and, optionally, its shape."""

    model_config = ConfigDict(extra="forbid")

    params_b: Annotated[float, Field(gt=0, le=2000, description="parameters, billions")]
    layers: Annotated[int, Field(gt=0, le=1000)] | None = None
    hidden: Annotated[int, Field(gt=0, le=131072)] | None = None
    heads: Annotated[int, Field(gt=0, le=4096)] | None = None
    kv_heads: Annotated[int, Field(gt=0, le=4096)] | None = None
    intermediate: Annotated[int, Field(gt=0, le=1048576)] | None = None
    vocab: Annotated[int, Field(gt=0, le=4_000_000)] | None = None
    name: str | None = None


class HfConfigSpec(BaseModel):
    """A model given by its Hugging Face ``config.json`` contents."""

    model_config = ConfigDict(extra="forbid")

    hf_config: dict[str, Any]


ModelSpec = str | ModelDims | HfConfigSpec


class Workload(BaseModel):
    # Frozen: estimates are memoised on the workload's content, so it must not change under them.
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelSpec
    method: Method = "full"
    precision: Precision = "bf16"
    optimizer: OptimizerName = "adamw"
    micro_batch_size: Annotated[int, Field(ge=1, le=65536)] = 8
    seq_len: Annotated[int, Field(ge=1, le=1_048_576)] = 512
    gradient_checkpointing: bool = False
    sharding: Sharding = "auto"
    lora_rank: Annotated[int, Field(ge=1, le=8192)] = 16
    lora_targets: LoraTargets = "attention"
    flash_attention: bool = Field(
        default=True,
        description="fused attention (FlashAttention / SDPA): no s x s score matrix is kept",
    )
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=100_000)] = 1
    tokens: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    samples: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    dataset_tokens: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    epochs: Annotated[float, Field(gt=0, le=10_000)] | None = None
    dataset_gb: Annotated[float, Field(ge=0, le=1_000_000)] | None = Field(
        default=None, description="raw dataset size on disk; derived from tokens when absent"
    )

    @model_validator(mode="after")
    def _amount(self) -> Workload:
        given = [n for n in ("tokens", "samples", "dataset_tokens") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give only one of tokens, samples, dataset_tokens (got {', '.join(given)})")
        if self.epochs is not None and self.dataset_tokens is None:
            raise ValueError("epochs needs dataset_tokens")
        if isinstance(self.model, str) and not self.model.strip():
            raise ValueError("model must not be empty")
        if self.total_tokens > MAX_TOKENS:
            raise ValueError(f"amount of training exceeds {MAX_TOKENS:.0e} tokens")
        return self

    @property
    def total_tokens(self) -> float:
        """Tokens processed over the whole run, epochs included (default 1e8 when unspecified)."""
        if self.tokens is not None:
            return self.tokens
        if self.samples is not None:
            return self.samples * self.seq_len
        if self.dataset_tokens is not None:
            return self.dataset_tokens * (self.epochs or 1.0)
        return 1e8

    @property
    def effective_sharding(self) -> Sharding:
        return self.sharding

    @cached_property
    def _key(self) -> str:
        return self.model_dump_json()

    def cache_key(self) -> str:
        """The workload's content as a string, computed once per object (it is frozen)."""
        return self._key

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Workload:
        copied = super().model_copy(update=update, deep=deep)
        # The copy inherits the memoised key with the rest of __dict__; it may no longer match.
        copied.__dict__.pop("_key", None)
        return copied


class Constraints(BaseModel):
    model_config = ConfigDict(extra="forbid")

    deadline_hours: Annotated[float, Field(gt=0, le=100_000)] | None = None
    budget_usd: Annotated[float, Field(gt=0, le=1e12)] | None = None
    providers: list[str] | None = None
    regions: list[str] | None = None
    gpus: list[str] | None = None
    allow_spot: bool = False
    include_local: bool = True
    max_gpus: Annotated[int, Field(ge=1, le=4096)] | None = None
    electricity_usd_per_kwh: Annotated[float, Field(ge=0, le=10)] | None = None
