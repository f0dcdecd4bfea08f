"""The Workload: what is trained, how, and for how long (CONTRACT "Workload").

Pure value objects. The model may be a preset name, explicit dimensions, or a Hugging Face
``config.json``; it is resolved to a ``ModelShape`` by ``optimizer.estimator.shapes``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from optimizer.estimator.hf_limits import MIN_PARAMS_B, check_hf_config

Method = Literal["full", "lora", "qlora"]
# fp32: PyTorch's default, matmuls in full fp32 (TF32 off); tf32: fp32 storage, TF32 tensor-core matmuls.
# auto (CONTRACT v3 default): bf16 where the card has bf16 tensor cores, fp16 on Volta/Turing; the
# estimator resolves it per GPU (optimizer.estimator.precision).
Precision = Literal["fp32", "tf32", "fp16", "bf16", "bf16-true", "auto"]
OptimizerName = Literal["adamw", "adamw_8bit", "adafactor", "sgd"]
Sharding = Literal["ddp", "zero1", "zero2", "zero3", "fsdp", "auto"]
# attention: q, k, v, o; qv: q and v only (the LoRA paper's and litgpt's default); all-linear: + MLP.
LoraTargets = Literal["attention", "qv", "all-linear"]
# Where optimizer states (and parameters) live between steps: ZeRO-Offload / FSDP CPU offload.
Offload = Literal["none", "optimizer", "optimizer+params"]
# The training software: eager transformers + PEFT, torch.compile, fused-kernel stacks (Liger,
# Unsloth), litgpt (chunked loss, no PEFT k-bit upcast).
Stack = Literal["hf", "compiled", "fused", "litgpt"]
# QLoRA's 4-bit format and the code that dequantizes it: bitsandbytes NF4 (its fused CUDA kernel),
# or a GPTQ Int4 checkpoint trained through auto-gptq's PyTorch path (transformers' GPTQ loader).
Quantization = Literal["nf4", "gptq"]
# Image models: how feature maps lie in memory. channels_last (NHWC) is what tensor-core
# convolutions run natively; nchw is PyTorch's default, which cuDNN transposes around each
# tensor-core convolution (optimizer.estimator.throughput.nchw_transpose_bytes).
MemoryFormat = Literal["channels_last", "nchw"]
# The loss over the vocabulary: "auto" is the stack's own (optimizer.estimator.stacks); "eager" is
# transformers' ForCausalLMLoss (fp32 upcast, shifted copy, fp32 log-probabilities); "fused" is a
# fused cross-entropy kernel that upcasts in registers: 16-bit logits and their 16-bit gradient
# only (flash-attn's CrossEntropyLoss, llm-foundry's MPT default).
CrossEntropy = Literal["auto", "eager", "fused"]

# Largest amount of training we accept: 1e14 tokens is ~7x Llama-3's pre-training run.
MAX_TOKENS = 1e14

# How much is trained, not how: these set a run's tokens, FLOPs, hours and dataset size and nothing
# else, so estimates are memoised without them (``Workload.rate_key``, ``optimizer.estimator.amounts``).
AMOUNT_FIELDS = frozenset({"tokens", "samples", "dataset_tokens", "dataset_samples", "epochs", "dataset_gb"})
AMOUNT_ORDER = tuple(sorted(AMOUNT_FIELDS))  # how ``Workload.amount`` lists them


class ModelDims(BaseModel):
    """A model given by its size and, optionally, its shape."""

    model_config = ConfigDict(extra="forbid")

    # At least a thousand parameters: 1e-300 would round to a 0-parameter model priced at $0.
    params_b: Annotated[float, Field(ge=MIN_PARAMS_B, le=2000, description="parameters, billions")]
    layers: Annotated[int, Field(gt=0, le=1000)] | None = None
    hidden: Annotated[int, Field(gt=0, le=131072)] | None = None
    heads: Annotated[int, Field(gt=0, le=4096)] | None = None
    kv_heads: Annotated[int, Field(gt=0, le=4096)] | None = None
    intermediate: Annotated[int, Field(gt=0, le=1048576)] | None = None
    vocab: Annotated[int, Field(gt=0, le=4_000_000)] | None = None
    name: Annotated[str, Field(max_length=200)] | None = None


class HfConfigSpec(BaseModel):
    """A model given by its Hugging Face ``config.json`` contents."""

    model_config = ConfigDict(extra="forbid")

    hf_config: dict[str, Any]

    # Size, depth and every size field bounded before anything computes with them.
    _bounded = field_validator("hf_config")(check_hf_config)


def _model_kind(value: Any) -> str | None:
    """Which form of model a request gives, so a bad config.json is reported by its own errors
    (``hf_config.num_hidden_layers ...``), not drowned by "not a string" and "params_b missing"."""
    if isinstance(value, str):
        return "preset"
    if isinstance(value, HfConfigSpec) or (isinstance(value, dict) and "hf_config" in value):
        return "hf"
    if isinstance(value, (ModelDims, dict)):
        return "dims"
    return None


ModelSpec = Annotated[
    Annotated[str, Field(max_length=200), Tag("preset")] | Annotated[ModelDims, Tag("dims")] | Annotated[HfConfigSpec, Tag("hf")],
    Discriminator(
        _model_kind,
        custom_error_type="model_spec",
        custom_error_message="model must be a preset name, an object with params_b, or {\"hf_config\": {...}}",
    ),
]


class Workload(BaseModel):
    # Frozen: estimates are memoised on the workload's content, so it must not change under them.
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: ModelSpec
    method: Method = "full"
    precision: Precision = "auto"
    optimizer: OptimizerName = "adamw"
    global_batch_size: Annotated[int, Field(ge=1, le=1_048_576)] = Field(
        default=16, description="sequences per optimizer step: what the run means, the same on every option"
    )
    micro_batch_size: Annotated[int, Field(ge=1, le=65536)] | Literal["auto"] = Field(
        default="auto", description='sequences per GPU per forward pass; "auto": the largest that fits and runs fastest'
    )
    seq_len: Annotated[int, Field(ge=1, le=1_048_576)] = 512
    gradient_checkpointing: bool | Literal["auto", "offload"] = Field(
        default="auto",
        description='recompute activations; "offload": checkpointed activations kept in host RAM (fused '
        'stacks); "auto": only where it is needed to fit or pays',
    )
    sharding: Sharding = "auto"
    lora_rank: Annotated[int, Field(ge=1, le=8192)] = 16
    lora_targets: LoraTargets = "attention"
    flash_attention: bool = Field(
        default=True,
        description="fused attention (FlashAttention / SDPA): no s x s score matrix is kept",
    )
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        default=None,
        description="micro-steps per optimizer step; derived (global batch / (micro-batch x GPUs)) when absent",
    )
    offload: Offload = "none"
    stack: Stack = "hf"
    quantization: Quantization = Field(
        default="nf4",
        description='qlora only: "nf4" (bitsandbytes) or "gptq" (a GPTQ Int4 checkpoint; auto-gptq dequantizes '
        'it with plain PyTorch ops for training)',
    )
    image_size: Annotated[int, Field(ge=32, le=4096, description="vision models: pixels per side")] = 224
    cross_entropy: CrossEntropy = Field(
        default="auto",
        description='language models\' loss: "auto" (the stack\'s own), "eager" (fp32 upcast and fp32 '
        'log-probabilities, as transformers) or "fused" (one kernel over the 16-bit logits, no fp32 copy)',
    )
    memory_format: MemoryFormat = Field(
        default="channels_last",
        description='image models: "channels_last" (NHWC, as tuned recipes run tensor-core convolutions) or '
        '"nchw" (PyTorch\'s default layout: cuDNN transposes around every tensor-core convolution)',
    )
    tokens: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    samples: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    dataset_tokens: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    dataset_samples: Annotated[float, Field(gt=0, le=MAX_TOKENS)] | None = None
    epochs: Annotated[float, Field(gt=0, le=10_000)] | None = None
    dataset_gb: Annotated[float, Field(ge=0, le=1_000_000)] | None = Field(
        default=None, description="raw dataset size on disk; derived from tokens when absent"
    )

    @model_validator(mode="after")
    def _amount(self) -> Workload:
        amounts = ("tokens", "samples", "dataset_tokens", "dataset_samples")
        given = [n for n in amounts if getattr(self, n) is not None]
        if len(given) > 1:
            raise ValueError(f"give only one of {', '.join(amounts)} (got {', '.join(given)})")
        if self.epochs is not None and self.dataset_tokens is None and self.dataset_samples is None:
            raise ValueError("epochs needs dataset_tokens or dataset_samples")
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
        if self.dataset_samples is not None:
            return self.dataset_samples * (self.epochs or 1.0) * self.seq_len
        return 1e8

    @property
    def total_samples(self) -> float | None:
        """Samples (sequences, or images for vision models) over the run, when given as samples."""
        if self.samples is not None:
            return self.samples
        if self.dataset_samples is not None:
            return self.dataset_samples * (self.epochs or 1.0)
        return None

    @property
    def is_concrete(self) -> bool:
        """Whether the recipe is fully given (no ``auto`` left), as the memory and speed models need."""
        return (
            self.micro_batch_size != "auto"
            and self.gradient_checkpointing != "auto"
            and self.gradient_accumulation_steps is not None
        )

    @property
    def accumulation_steps(self) -> int:
        """Micro-steps per optimizer step (1 until a recipe sets it)."""
        return self.gradient_accumulation_steps or 1

    @property
    def effective_sharding(self) -> Sharding:
        return self.sharding

    @cached_property
    def _key(self) -> str:
        # The amount-free key (one digest, or derived for a recipe's or precision's copy) and the
        # amount: no second digest, and a short key whatever the model's config holds.
        return f"{self.rate_key()}|{self.amount()!r}"

    def cache_key(self) -> str:
        """A key of the workload's whole content (``rate_key`` and ``amount``), computed once per
        object (it is frozen). Workloads with different content never share it; equal ones made
        different ways (a copy's derived key against a digest) may not, which only misses a memo."""
        return self._key

    @cached_property
    def _rate_key(self) -> str:
        return hashlib.sha256(self.model_dump_json(exclude=set(AMOUNT_FIELDS)).encode()).hexdigest()

    def rate_key(self) -> str:
        """A digest of everything but the amount of training (``AMOUNT_FIELDS``): what memory,
        speed and the recipe depend on. Workloads that differ only in tokens share it."""
        return self._rate_key

    def with_recipe(self, micro: int, checkpointing: bool | str, accumulation: int) -> Workload:
        """This workload with its micro-batch, checkpointing and accumulation fixed
        (``recipe.concrete_workload``). The copy's ``rate_key`` is this one's with the three values
        appended, not a new digest of its JSON: it differs from this workload in them alone, and the
        recipe search of a new model makes dozens of copies (a digest costs ~40 us each)."""
        return self._keyed_copy({
            "micro_batch_size": micro, "gradient_checkpointing": checkpointing,
            "gradient_accumulation_steps": accumulation,
        }, f"{micro}/{checkpointing}/{accumulation}")

    def with_precision_resolved(self, precision: str) -> Workload:
        """This workload with ``precision: "auto"`` replaced by ``precision``
        (``precision.with_precision``); like ``with_recipe``, the copy's ``rate_key`` is derived
        from this one's (every new model resolves it per card type)."""
        return self._keyed_copy({"precision": precision}, f"precision={precision}")

    def _keyed_copy(self, update: dict[str, Any], suffix: str) -> Workload:
        """This workload with ``update``, its ``rate_key`` this one's and ``suffix`` (which names
        the updated values: no two updates of one workload may share it)."""
        copied = self.model_copy(update=update)
        copied.__dict__["_rate_key"] = f"{self.rate_key()}/{suffix}"
        return copied

    @cached_property
    def _amount_asked(self) -> tuple[float | None, ...]:
        return tuple(getattr(self, f) for f in AMOUNT_ORDER)

    def amount(self) -> tuple[float | None, ...]:
        """The amount of training asked for: the ``AMOUNT_FIELDS`` in ``AMOUNT_ORDER``, computed
        once per object (a quote compares amounts several hundred times)."""
        return self._amount_asked

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Workload:
        copied = super().model_copy(update=update, deep=deep)
        # The copy inherits the memoised keys with the rest of __dict__; they may no longer match.
        copied.__dict__.pop("_key", None)
        copied.__dict__.pop("_rate_key", None)
        copied.__dict__.pop("_amount_asked", None)
        return copied


# A provider, region or GPU name: short, never empty (request sizes stay bounded).
Name = Annotated[str, Field(min_length=1, max_length=100)]


class Constraints(BaseModel):
    model_config = ConfigDict(extra="forbid")

    deadline_hours: Annotated[float, Field(gt=0, le=100_000)] | None = None
    budget_usd: Annotated[float, Field(gt=0, le=1e12)] | None = None
    providers: Annotated[list[Name], Field(max_length=100)] | None = None
    regions: Annotated[list[Name], Field(max_length=500)] | None = None
    gpus: Annotated[list[Name], Field(max_length=100)] | None = None
    allow_spot: bool = False
    include_local: bool = True
    max_gpus: Annotated[int, Field(ge=1, le=4096)] | None = None
    electricity_usd_per_kwh: Annotated[float, Field(ge=0, le=10)] | None = None
    # A region of the bundled electricity table (us-average, us-iowa, cn-beijing ...); an
    # explicit electricity_usd_per_kwh wins.
    electricity_region: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    # Reject cloud options the account's quotas cannot launch (optimizer.quotas); unknown ones stay.
    respect_quotas: bool = False
    # Hours of training between checkpoints on spot; None: Young's formula (optimizer.spot_risk).
    checkpoint_interval_hours: Annotated[float, Field(gt=0, le=1000)] | None = None
    # Share of each card's VRAM kept free (0.1: use at most 90 %). None: the estimate's range
    # decides (its upper end should fit); a number is a hard limit on the point estimate.
    safety_margin: Annotated[float, Field(ge=0, lt=0.9)] | None = None
    # Prices far from their provider's usual level, or older than the age limit, are rejected
    # unless this is true.
    allow_suspect_prices: bool = False
    # GB that leave the cloud per run (checkpoints, outputs, datasets), billed at the provider's egress rate.
    egress_gb: Annotated[float, Field(ge=0, le=1e7)] | None = None
    # Plans: each team's monthly spend cap in USD ({"vision": 2000}); jobs name their ``team``.
    team_budgets: Annotated[dict[Annotated[str, Field(min_length=1, max_length=100)],
                                 Annotated[float, Field(ge=0, le=1e12)]], Field(max_length=200)] | None = None
