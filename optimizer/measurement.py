"""A measurement: real training steps of one workload on one device, as data.

``gpucost probe``, the training-loop hooks (``service.probe.hooks``) and hand-made imports all
write this record (CONTRACT v3, "Probe and measurements"); ``gpucost measurements add`` and
``POST /v1/measurements`` check it with ``checked`` before anything is stored, and
``optimizer.measured`` lets every answer use it.

A measurement is of one recipe: the workload it carries names its micro-batch and checkpointing
explicitly (not ``auto``). ``step_seconds`` are of one optimizer step at that micro-batch (no
gradient accumulation); ``tokens_per_second`` and ``samples_per_second`` are of all ``gpu_count``
devices together; memory is in GB (10^9 bytes) of one device, ``peak_vram_gb`` being the
allocator's reserved peak (what must fit) and ``allocated_peak_gb`` its allocated peak.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import canonical_gpu, gpu_spec
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload

CPU = "cpu"
Source = Literal["probe", "training-loop", "import"]

# How far a record's stated parameter count may sit from its workload's model before the record
# is taken for another model: the estimator counts a preset's parameters from its dimensions, a
# built transformers model may add or drop a bias or a tied head (a few per cent at most).
PARAMS_TOLERANCE = 0.10
# How far tokens_per_second may sit from what step_seconds.median implies (tokens per step over
# the median step). The median and the mean of a few steps differ by a few per cent; a factor of
# 1.5 only catches records whose figures do not belong together.
RATE_TOLERANCE = 1.5
# Marketed VRAM is binary (a "24 GB" card has 24 GiB = 25.8 GB); a reserved peak above 1.1 x the
# catalog's GB cannot be of this card: the record is in other units (bytes, MiB) or of another GPU.
VRAM_SLACK = 1.1


class StepSeconds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    median: Annotated[float, Field(gt=0, le=86_400, description="seconds per optimizer step")]
    p10: Annotated[float, Field(gt=0, le=86_400)]
    p90: Annotated[float, Field(gt=0, le=86_400)]


class Measurement(BaseModel):
    """One measured recipe on one device (CONTRACT v3). ``id`` is given by the store."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")] | None = None
    workload: Workload
    gpu: Annotated[str, Field(min_length=1, max_length=100, description='canonical GPU name, or "cpu"')]
    gpu_count: Annotated[int, Field(ge=1, le=4096)] = 1
    device_name: Annotated[str, Field(max_length=200)] = ""
    steps: Annotated[int, Field(ge=1, le=10_000_000, description="timed steps")]
    warmup_steps: Annotated[int, Field(ge=0, le=10_000_000)] = 0
    step_seconds: StepSeconds | None = None
    tokens_per_second: Annotated[float, Field(gt=0, le=1e12)] | None = None
    samples_per_second: Annotated[float, Field(gt=0, le=1e12)] | None = None
    peak_vram_gb: Annotated[float, Field(ge=0, le=100_000, description="reserved peak, GB")] | None = None
    allocated_peak_gb: Annotated[float, Field(ge=0, le=100_000)] | None = None
    mfu: Annotated[float, Field(ge=0, le=1, description="a fraction, 0-1")] | None = None
    fits: bool = True
    measured_at: datetime
    software: dict[Annotated[str, Field(max_length=100)], Annotated[str, Field(max_length=200)]] = Field(
        default_factory=dict, max_length=50
    )
    source: Source = "import"
    model_params: Annotated[int, Field(ge=1, le=10**13, description="parameters of the model as run")] | None = None
    trainable_params: Annotated[int, Field(ge=0, le=10**13)] | None = None
    device: dict[Annotated[str, Field(max_length=100)], float | str | None] = Field(
        default_factory=dict, max_length=50,
        description="what the device reported: clocks (MHz), power limit (W), memory (GB), where known",
    )
    notes: Annotated[str, Field(max_length=2000)] = ""

    @field_validator("measured_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("needs a timezone (e.g. 2026-12-01T10:00:00Z)")
        return value.astimezone(UTC)

    def content_id(self) -> str:
        """The id the store gives the record: a digest of its content, so adding it twice is one record."""
        body = self.model_dump(mode="json", exclude={"id"}, exclude_none=True)
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return "m-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def tokens_per_step(self) -> int:
        """Tokens one step processes on all devices (micro-batch x sequence x devices)."""
        mb = self.workload.micro_batch_size
        assert isinstance(mb, int)  # checked: a measurement is of one recipe
        return mb * self.workload.seq_len * self.gpu_count


def parse_measurement(data: Any) -> Measurement:
    """The record in ``data``, checked (``checked``); InvalidInput names the first bad field."""
    if not isinstance(data, dict):
        raise InvalidInput("measurement", "must be a JSON object (one Measurement)")
    try:
        m = Measurement.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidInput(loc or "measurement", str(first.get("msg", "invalid value"))) from None
    return checked(m)


def checked(m: Measurement) -> Measurement:
    """``m`` with its GPU name made canonical, or InvalidInput naming the field that makes it
    impossible: an unknown GPU, a recipe left to ``auto``, figures in other units or that do not
    belong together, or a record of another model than its workload names."""
    gpu = CPU if m.gpu.strip().lower() == CPU else canonical_gpu(m.gpu, field="gpu")
    w = m.workload
    if w.micro_batch_size == "auto":
        raise InvalidInput("workload.micro_batch_size", "a measurement is of one recipe: give the micro-batch it ran")
    if w.gradient_checkpointing == "auto":
        raise InvalidInput("workload.gradient_checkpointing", "a measurement is of one recipe: say whether "
                           "checkpointing was on (true or false)")
    shape = resolve_model(w.model)  # an unknown preset is named by its own field
    if m.model_params is not None:
        expected = shape.params
        if abs(m.model_params - expected) > PARAMS_TOLERANCE * expected:
            raise InvalidInput(
                "model_params",
                f"the record's model has {m.model_params:,} parameters but its workload's model "
                f"({shape.name}) has {expected:,}: this is a record of a different model",
            )
    if m.fits:
        if m.step_seconds is None:
            raise InvalidInput("step_seconds", "required when fits is true (median, p10, p90 in seconds)")
        if m.tokens_per_second is None:
            raise InvalidInput("tokens_per_second", "required when fits is true")
        s = m.step_seconds
        if not s.p10 <= s.median <= s.p90:
            raise InvalidInput("step_seconds", f"needs p10 <= median <= p90 (got {s.p10}, {s.median}, {s.p90})")
        mb = w.micro_batch_size
        assert isinstance(mb, int)
        implied = mb * w.seq_len * m.gpu_count / s.median
        ratio = m.tokens_per_second / implied
        if ratio > 100:
            raise InvalidInput(
                "step_seconds.median",
                f"{s.median} s per step at {mb} x {w.seq_len} tokens means {implied:,.1f} tokens/s, "
                f"{ratio:,.0f}x less than tokens_per_second {m.tokens_per_second:,.1f}: step_seconds are "
                "seconds, not milliseconds",
            )
        if not 1 / RATE_TOLERANCE <= ratio <= RATE_TOLERANCE:
            raise InvalidInput(
                "tokens_per_second",
                f"{m.tokens_per_second:,.1f} does not match step_seconds.median {s.median} s at "
                f"{mb} x {w.seq_len} tokens x {m.gpu_count} device(s) ({implied:,.1f} tokens/s)",
            )
    if gpu != CPU:
        vram = gpu_spec(gpu).vram_gb
        for field in ("peak_vram_gb", "allocated_peak_gb"):
            value = getattr(m, field)
            if value is not None and value > vram * VRAM_SLACK:
                raise InvalidInput(
                    field, f"{value:g} GB exceeds {gpu}'s {vram:g} GB: memory is in GB (10^9 bytes), "
                    "not bytes or MiB, of one GPU",
                )
    if (m.peak_vram_gb is not None and m.allocated_peak_gb is not None
            and m.allocated_peak_gb > m.peak_vram_gb * 1.001 + 1e-6):
        raise InvalidInput("allocated_peak_gb", "cannot exceed peak_vram_gb (the reserved peak holds the allocated)")
    if m.measured_at > datetime.now(UTC) + timedelta(days=1):
        raise InvalidInput("measured_at", "is in the future")
    if not math.isfinite(m.tokens_per_second or 0.0):
        raise InvalidInput("tokens_per_second", "must be finite")
    out = m.model_copy(update={"gpu": gpu})
    return out.model_copy(update={"id": m.id or out.content_id()})
