"""Workload flags shared by commands that accept a job without a request file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel

from optimizer.errors import InvalidInput
from service.commands._common import build_workload, load_request, parse_request

M = TypeVar("M", bound=BaseModel)

RequestOpt = Annotated[Path | None, typer.Option("--request", "-r", help="request JSON file")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="preset name, e.g. llama-3-8b")]
MethodOpt = Annotated[str | None, typer.Option("--method", help="full | lora | qlora")]
PrecisionOpt = Annotated[str | None, typer.Option("--precision", help="fp32 | fp16 | bf16 | bf16-true")]
OptimizerOpt = Annotated[str | None, typer.Option("--optimizer", help="adamw | adamw_8bit | sgd")]
BatchOpt = Annotated[int | None, typer.Option("--micro-batch-size", "--batch", help="per GPU")]
SeqOpt = Annotated[int | None, typer.Option("--seq-len", help="tokens per sample")]
CkptOpt = Annotated[
    bool | None, typer.Option("--gradient-checkpointing/--no-gradient-checkpointing", help="recompute activations")
]
ShardingOpt = Annotated[str | None, typer.Option("--sharding", help="ddp | zero1 | zero2 | zero3 | fsdp | auto")]
RankOpt = Annotated[int | None, typer.Option("--lora-rank", help="LoRA rank")]
TokensOpt = Annotated[float | None, typer.Option("--tokens", help="tokens to train, epochs included (1e8 ok)")]


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
    overrides = {k: v for k, v in (extra or {}).items() if v is not None}
    if request is None:
        if "model" not in flags:
            raise InvalidInput("request", "give --request FILE.json or at least --model")
        data: dict[str, Any] = {"workload": build_workload(**flags).model_dump()}
    else:
        if not flags and not overrides:
            return load_request(request, model_cls)
        data = load_request(request, model_cls).model_dump()
        if flags:
            overrides["workload"] = flags
    for key, value in overrides.items():
        if key in _MERGED_FIELDS and isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return parse_request(data, model_cls)
