"""Flags shared by the commands that take a job: the Workload's fields and the Constraints'.

Each flag is declared once here and added to a command by ``@with_flags(WORKLOAD_FLAGS, ...)``,
so every command that takes a job spells a field the same way (``--micro-batch-size``,
``--spot/--no-spot``) and none lacks one the API has. The command receives the flags it was given
as ``flags`` (a dict by parameter name; flags left unset are absent).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from optimizer.errors import InvalidInput
from service.commands._common import build_workload, load_request, parse_csv_list, parse_request

M = TypeVar("M", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])

RequestOpt = Annotated[Path | None, typer.Option("--request", "-r", help="request JSON file (- reads standard input)")]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help='preset name, e.g. llama-3-8b, or dimensions as JSON {"params_b": ...}')
]
MethodOpt = Annotated[str | None, typer.Option("--method", help="full | lora | qlora")]
PrecisionOpt = Annotated[
    str | None, typer.Option("--precision", help="auto (default) | fp32 | tf32 | fp16 | bf16 | bf16-true")
]
OptimizerOpt = Annotated[
    str | None, typer.Option("--optimizer", help="adamw | adamw_8bit | adafactor | sgd")
]
BatchOpt = Annotated[
    str | None, typer.Option("--micro-batch-size", "--batch", help="per GPU: a number or auto")
]
GlobalBatchOpt = Annotated[
    int | None, typer.Option("--global-batch-size", min=1, help="sequences per optimizer step")
]
SeqOpt = Annotated[int | None, typer.Option("--seq-len", min=1, help="tokens per sample")]
CkptOpt = Annotated[
    bool | None,
    typer.Option(
        "--gradient-checkpointing/--no-gradient-checkpointing",
        help="recompute activations (default: where needed)",
        show_default=False,
    ),
]
ShardingOpt = Annotated[
    str | None, typer.Option("--sharding", help="ddp | zero1 | zero2 | zero3 | fsdp | auto")
]
OffloadOpt = Annotated[str | None, typer.Option("--offload", help="none | optimizer | optimizer+params")]
RankOpt = Annotated[int | None, typer.Option("--lora-rank", min=1, help="LoRA rank")]
TargetsOpt = Annotated[str | None, typer.Option("--lora-targets", help="attention | qv | all-linear")]
StackOpt = Annotated[str | None, typer.Option("--stack", help="hf | compiled | fused | litgpt")]
QuantizationOpt = Annotated[
    str | None, typer.Option("--quantization", help="qlora's 4-bit format: nf4 (bitsandbytes) | gptq (auto-gptq)")
]
ImageSizeOpt = Annotated[int | None, typer.Option("--image-size", min=1, help="vision: pixels per side")]
CrossEntropyOpt = Annotated[
    str | None,
    typer.Option("--cross-entropy", help="LM loss: auto (the stack's) | eager (fp32 upcast) | fused (one kernel)"),
]
MemoryFormatOpt = Annotated[
    str | None,
    typer.Option("--memory-format", help="vision: channels_last (NHWC) | nchw (PyTorch's default layout)"),
]
TokensOpt = Annotated[
    float | None, typer.Option("--tokens", help="tokens to train, epochs included (1e8 ok)")
]
SamplesOpt = Annotated[float | None, typer.Option("--samples", help="sequences (or images) to train")]
DatasetSamplesOpt = Annotated[
    float | None, typer.Option("--dataset-samples", help="sequences (or images) in the dataset; with --epochs")
]
EpochsOpt = Annotated[float | None, typer.Option("--epochs", help="passes over --dataset-samples")]

GpuOpt = Annotated[str | None, typer.Option("--gpu", help="only these GPUs (comma-separated)")]
ProviderOpt = Annotated[
    str | None, typer.Option("--provider", help="only these providers (comma-separated)")
]
RegionOpt = Annotated[str | None, typer.Option("--region", help="only these regions (comma-separated)")]
DeadlineOpt = Annotated[
    float | None, typer.Option("--deadline-hours", help="each run must finish within")
]
BudgetOpt = Annotated[float | None, typer.Option("--budget", help="USD for all runs")]
SpotOpt = Annotated[
    bool | None, typer.Option("--spot/--no-spot", help="allow spot capacity", show_default=False)
]
LocalOpt = Annotated[
    bool | None,
    typer.Option("--local/--no-local", help="consider buying a local build", show_default=False),
]
MaxGpusOpt = Annotated[int | None, typer.Option("--max-gpus", min=1, help="most GPUs per option")]
KwhOpt = Annotated[
    float | None,
    typer.Option("--electricity-usd-per-kwh", min=0, help="electricity price for owned machines"),
]
KwhRegionOpt = Annotated[
    str | None,
    typer.Option("--electricity-region", help="electricity price of a region (us-average, us-iowa, cn-beijing ...)"),
]
SafetyMarginOpt = Annotated[
    float | None,
    typer.Option("--safety-margin", min=0, max=0.89,
                 help="share of each card's VRAM kept free (default: the estimate's range must fit)"),
]
SuspectOpt = Annotated[
    bool | None,
    typer.Option("--allow-suspect-prices/--no-suspect-prices", show_default=False,
                 help="allow prices far from the provider's usual level or older than the age limit"),
]
EgressOpt = Annotated[
    float | None, typer.Option("--egress-gb", min=0, max=1e7, help="GB leaving the cloud per run (egress is billed)")
]

# Parameter name (= the Workload field) -> its flag.
WORKLOAD_FLAGS: dict[str, Any] = {
    "model": ModelOpt,
    "method": MethodOpt,
    "precision": PrecisionOpt,
    "optimizer": OptimizerOpt,
    "micro_batch_size": BatchOpt,
    "global_batch_size": GlobalBatchOpt,
    "seq_len": SeqOpt,
    "gradient_checkpointing": CkptOpt,
    "sharding": ShardingOpt,
    "offload": OffloadOpt,
    "lora_rank": RankOpt,
    "lora_targets": TargetsOpt,
    "stack": StackOpt,
    "quantization": QuantizationOpt,
    "image_size": ImageSizeOpt,
    "memory_format": MemoryFormatOpt,
    "cross_entropy": CrossEntropyOpt,
    "tokens": TokensOpt,
    "samples": SamplesOpt,
    "dataset_samples": DatasetSamplesOpt,
    "epochs": EpochsOpt,
}

# Parameter name -> its flag; ``CONSTRAINT_FIELDS`` says which Constraints field each sets.
CONSTRAINT_FLAGS: dict[str, Any] = {
    "gpu": GpuOpt,
    "provider": ProviderOpt,
    "region": RegionOpt,
    "deadline_hours": DeadlineOpt,
    "budget": BudgetOpt,
    "spot": SpotOpt,
    "local": LocalOpt,
    "max_gpus": MaxGpusOpt,
    "electricity_usd_per_kwh": KwhOpt,
    "electricity_region": KwhRegionOpt,
    "safety_margin": SafetyMarginOpt,
    "allow_suspect_prices": SuspectOpt,
    "egress_gb": EgressOpt,
}
CONSTRAINT_FIELDS = {
    "gpu": "gpus",
    "provider": "providers",
    "region": "regions",
    "deadline_hours": "deadline_hours",
    "budget": "budget_usd",
    "spot": "allow_spot",
    "local": "include_local",
    "max_gpus": "max_gpus",
    "electricity_usd_per_kwh": "electricity_usd_per_kwh",
    "electricity_region": "electricity_region",
    "safety_margin": "safety_margin",
    "allow_suspect_prices": "allow_suspect_prices",
    "egress_gb": "egress_gb",
}
_LISTS = {"gpu", "provider", "region"}


def pick(flags: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """The subset of ``flags`` named (a flag table like ``CONSTRAINT_FLAGS`` narrowed for a command)."""
    return {n: flags[n] for n in names}


def with_flags(*tables: Mapping[str, Any]) -> Callable[[F], F]:
    """Add the flags of ``tables`` to a typer command; it receives those given as ``flags``.

    Typer reads a command's parameters from its signature, so the wrapper's signature is the
    command's own (less ``flags``) with the shared flags inserted after ``--request``.
    """

    def decorate(func: F) -> F:
        sig = inspect.signature(func, eval_str=True)
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in sig.parameters.values() if p.name != "flags"]
        shared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
            for table in tables
            for name, annotation in table.items()
            if name not in sig.parameters
        ]
        names = {p.name for p in shared}
        head = [p for p in own if p.name == "request"]
        params = head + shared + [p for p in own if p.name != "request"]

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in list(kwargs) if n in names}
            return func(flags={k: v for k, v in given.items() if v is not None}, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper  # type: ignore[return-value]

    return decorate


def workload_fields(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload fields the flags set (``--batch auto`` stays ``"auto"``)."""
    fields = {k: v for k, v in flags.items() if k in WORKLOAD_FLAGS and v is not None}
    mbs = fields.get("micro_batch_size")
    if isinstance(mbs, str) and mbs != "auto":
        try:
            fields["micro_batch_size"] = int(mbs)
        except ValueError:
            raise InvalidInput("--micro-batch-size", f"{mbs!r} is neither a whole number nor auto") from None
    model = fields.get("model")
    if isinstance(model, str) and model.lstrip().startswith("{"):
        # Dimensions inline: --model '{"params_b": 0.1, "layers": 2, ...}' (as a request file's model).
        import json

        try:
            fields["model"] = json.loads(model)
        except json.JSONDecodeError as exc:
            raise InvalidInput("--model", f"not a preset name and not a JSON object: {exc.msg}") from None
    return fields


def constraint_fields(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The Constraints fields the flags set, by the Constraints' own names."""
    out: dict[str, Any] = {}
    for name, field in CONSTRAINT_FIELDS.items():
        value = flags.get(name)
        if name in _LISTS:
            value = parse_csv_list(value)
        if value is not None:
            out[field] = value
    return out


# Flags for these request fields update the file's object rather than replace it.
_MERGED_FIELDS = ("workload", "constraints")


def request_from(
    request: Path | None,
    model_cls: type[M],
    workload_fields: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> M:
    """The request from ``--request`` or from workload flags, with ``extra`` request fields.

    Flags that were given override the file: ``--runs 4`` with ``--request quote.json`` quotes
    four runs. Flags left unset (None) change nothing.
    """
    flags = {k: v for k, v in workload_fields.items() if v is not None}
    overrides = {k: v for k, v in (extra or {}).items() if v is not None and v != {}}
    if request is None:
        if "model" not in flags:
            raise InvalidInput("--model", "give --request FILE.json or at least --model")
        data: dict[str, Any] = {"workload": build_workload(**flags).model_dump(exclude_unset=True)}
    else:
        if not flags and not overrides:
            return load_request(request, model_cls)
        data = load_request(request, model_cls).model_dump(exclude_unset=True)
        if flags:
            overrides["workload"] = flags
    for key, value in overrides.items():
        if key in _MERGED_FIELDS and isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_request(data, model_cls)
