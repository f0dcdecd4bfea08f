"""Estimates that use what was measured.

A stored ``Measurement`` is of one recipe (model shape, method, precision, optimizer, sequence
length, micro-batch, checkpointing, LoRA rank and targets, offload, stack) on one device. An
estimate whose workload and fitted recipe give the same *match key* takes it:

- on the measured GPU (same name and count): the measured speed and memory replace the model's
  (``basis: "measured"``); hours are the measured training time plus the model's fixed per-run
  hours (set-up, download, checkpoints: a probe does not time them). A measured out-of-memory
  makes the recipe not fit there.
- on another GPU: the measurement times the model's ratio between the two GPUs
  (``basis: "scaled"``): ``tps_G = tps_measured(M) x model_tps(G) / model_tps(M)``, memory the same
  way. What a probe removes is the error common to both GPUs (stack, kernels, data pipeline); what
  stays is the model's error in the *ratio*, taken as half the model's own relative range (no GPU
  was lent to measure it: see docs/probe.md).

Pure: measurements come in as data (``service.answers`` reads them from the store), and
``measured_estimator`` wraps any estimator with the ``Estimator`` signature, so quote, break-even,
plan, recommend and frontier use measurements without knowing of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import gpu_spec
from optimizer.estimator.precision import auto_precision
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload
from optimizer.measurement import CPU, Measurement
from optimizer.results import Estimate, MemoryBreakdown

Key = tuple[Any, ...]
EstimatorFn = Callable[..., Estimate]

# Measured memory of one recipe varies a little between runs (allocator, kernels picked): the
# range kept around a measured peak.
MEASURED_MEMORY_SPAN = (0.98, 1.05)
# The share of the model's own relative throughput range that stays once one GPU was measured:
# the common error (stack, kernels, input pipeline) is gone, the cross-GPU ratio's error remains.
# An assumption until a GPU is lent to measure it (issue 21, item 6).
SCALED_RANGE_SHARE = 0.5


def precision_on(precision: str, gpu: str) -> str:
    """What ``precision`` means on ``gpu`` (``auto``: the card's choice; on the CPU bf16)."""
    if precision != "auto":
        return precision
    return auto_precision(None if gpu == CPU else gpu_spec(gpu))


def recipe_key(w: Workload, micro_batch: int, checkpointing: bool | str, precision: str | None = None) -> Key:
    """What must agree for a measurement to stand for an estimate (the GPU aside)."""
    shape = resolve_model(w.model)
    model = (shape.arch, shape.params, shape.layers, shape.hidden, shape.heads, shape.kv_heads,
             shape.intermediate, shape.vocab)
    lora = (w.lora_rank, w.lora_targets) if w.method != "full" else ()
    vision = (w.image_size,) if shape.is_vision else ()
    return (model, w.method, precision or w.precision, w.optimizer, w.seq_len, int(micro_batch), checkpointing,
            lora, w.offload, w.stack, w.flash_attention, vision)


def measurement_key(m: Measurement) -> Key:
    mb, ckpt = m.workload.micro_batch_size, m.workload.gradient_checkpointing
    assert isinstance(mb, int) and ckpt != "auto"  # checked when the record was read
    return recipe_key(m.workload, mb, ckpt, precision_on(m.workload.precision, m.gpu))


def estimate_key(est: Estimate, w: Workload) -> Key | None:
    """The key of the recipe ``est`` assumed (its fitted recipe, else the workload's explicit one)."""
    precision = getattr(est.recipe, "precision", None) or precision_on(w.precision, est.gpu)
    if est.recipe is not None:
        return recipe_key(w, est.recipe.micro_batch_size, est.recipe.gradient_checkpointing, precision)
    mb, ckpt = w.micro_batch_size, w.gradient_checkpointing
    if isinstance(mb, int) and ckpt != "auto":
        return recipe_key(w, mb, ckpt, precision)
    return None


class MeasurementIndex:
    """Measurements by match key, newest first."""

    def __init__(self, measurements: Iterable[Measurement]) -> None:
        self.by_key: dict[Key, list[Measurement]] = {}
        for m in sorted(measurements, key=lambda m: m.measured_at, reverse=True):
            self.by_key.setdefault(measurement_key(m), []).append(m)

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_key.values())

    def get(self, key: Key | None) -> list[Measurement]:
        return self.by_key.get(key, []) if key is not None else []


def _recipe_workload(w: Workload, m: Measurement) -> Workload:
    """``w`` with the measured recipe written out (the model's estimate of what was measured)."""
    return w.model_copy(update={
        "micro_batch_size": m.workload.micro_batch_size,
        "gradient_checkpointing": m.workload.gradient_checkpointing,
        "precision": precision_on(m.workload.precision, m.gpu) if m.gpu != CPU else w.precision,
    })


def _note(m: Measurement) -> str:
    where = m.device_name or m.gpu
    return f"{m.id} ({m.source} on {where}, {m.measured_at.date().isoformat()})"


def _rel_half_width(est: Estimate) -> float:
    lo, hi = est.range.get("tokens_per_second", [est.tokens_per_second, est.tokens_per_second])
    if est.tokens_per_second <= 0:
        return 0.0
    return max(0.0, (hi - lo) / 2.0 / est.tokens_per_second)


def _train_hours(est: Estimate) -> float:
    parts = est.details.get("hours_parts") if est.details else None
    return float(parts.get("train_hours", 0.0)) if parts else 0.0


def _with_speed(est: Estimate, w: Workload, tps: float, tps_range: list[float]) -> dict[str, Any]:
    """Fields of ``est`` that follow from a new tokens/s: hours, samples/s, MFU, their range."""
    fixed_h = max(0.0, est.hours - _train_hours(est))
    train_h = w.total_tokens / tps / 3600.0 if tps > 0 else float("inf")
    factor = tps / est.tokens_per_second if est.tokens_per_second > 0 else 1.0
    parts = dict(est.details.get("hours_parts", {})) if est.details else {}
    parts["train_hours"] = train_h
    rng = dict(est.range)
    rng["tokens_per_second"] = [round(tps_range[0], 1), round(tps_range[1], 1)]
    if "samples_per_second" in rng:
        rng["samples_per_second"] = [round(v * factor, 2) for v in rng["samples_per_second"]]
    return {
        "tokens_per_second": round(tps, 1),
        "samples_per_second": round(est.samples_per_second * factor, 2),
        "mfu": round(min(1.0, est.mfu * factor), 4),
        "hours": round(train_h + fixed_h, 4),
        "range": rng,
        "_hours_parts": parts,
    }


def _memory(est: Estimate, total_gb: float, allocated_gb: float | None) -> MemoryBreakdown:
    update: dict[str, float] = {"total_per_gpu": round(total_gb, 3)}
    if allocated_gb is not None:
        update["allocator_peak"] = round(allocated_gb, 3)
    return est.memory_gb.model_copy(update=update)


def _context_gb(est: Estimate) -> float:
    parts = est.details.get("memory_parts_gb", {}) if est.details else {}
    return float(parts.get("cuda_context", 0.0))


def _measured_total_gb(est_m: Estimate, m: Measurement) -> float | None:
    """The measured peak as the estimator counts ``total_per_gpu``: the reserved peak plus the
    CUDA context, which the allocator's statistics do not see."""
    if m.peak_vram_gb is None:
        return None
    return m.peak_vram_gb + _context_gb(est_m)


def _finish(est: Estimate, fields: dict[str, Any], basis: str, m: Measurement, note: str,
            model: dict[str, float]) -> Estimate:
    details = dict(est.details)
    hours_parts = fields.pop("_hours_parts", None)
    if hours_parts is not None:
        details["hours_parts"] = hours_parts
    details["model_figures"] = model
    details["measurement"] = {"id": m.id, "gpu": m.gpu, "gpu_count": m.gpu_count, "device_name": m.device_name,
                              "source": m.source, "measured_at": m.measured_at.isoformat(),
                              "tokens_per_second": m.tokens_per_second, "peak_vram_gb": m.peak_vram_gb,
                              "steps": m.steps}
    return est.model_copy(update={
        **fields, "details": details, "basis": basis, "measurement_id": m.id, "notes": (*est.notes, note),
    })


def _model_figures(est: Estimate) -> dict[str, float]:
    return {"tokens_per_second": est.tokens_per_second, "hours": est.hours,
            "total_per_gpu": est.memory_gb.total_per_gpu}


def on_measured_gpu(est: Estimate, w: Workload, m: Measurement) -> Estimate:
    """``est`` with the measurement's own figures: it was taken on this GPU and count."""
    model = _model_figures(est)
    if not m.fits:
        mb = m.workload.micro_batch_size
        warn = f"measured: does not fit at micro-batch {mb} on {m.gpu_count}x {m.gpu} ({_note(m)})"
        return _finish(est, {"fits": False, "warnings": (*est.warnings, warn)}, "measured", m, warn, model)
    assert m.step_seconds is not None and m.tokens_per_second is not None
    per_step = m.tokens_per_step
    tps_range = [per_step / m.step_seconds.p90, per_step / m.step_seconds.p10]
    fields = _with_speed(est, w, m.tokens_per_second, tps_range)
    total = _measured_total_gb(est, m)
    if total is not None:
        fields["memory_gb"] = _memory(est, total, m.allocated_peak_gb)
        fields["range"]["total_per_gpu"] = [round(total * MEASURED_MEMORY_SPAN[0], 3),
                                            round(total * MEASURED_MEMORY_SPAN[1], 3)]
    fields["fits"] = True  # it ran on this card
    note = f"measured: {m.tokens_per_second:,.0f} tokens/s" + (
        f", {m.peak_vram_gb:.2f} GB reserved peak" if m.peak_vram_gb is not None else "") + f" by {_note(m)}"
    return _finish(est, fields, "measured", m, note, model)


def scaled_from(est: Estimate, w: Workload, m: Measurement, est_m: Estimate) -> Estimate:
    """``est`` (on another GPU) from the measurement on ``m.gpu`` times the model's ratio between
    the two GPUs; ``est_m`` is the model's estimate of the measured recipe on the measured GPU."""
    assert m.tokens_per_second is not None and m.step_seconds is not None
    if est_m.tokens_per_second <= 0:
        return est
    ratio = est.tokens_per_second / est_m.tokens_per_second
    tps = m.tokens_per_second * ratio
    spread = SCALED_RANGE_SHARE * max(_rel_half_width(est), _rel_half_width(est_m))
    per_step = m.tokens_per_step
    lo = per_step / m.step_seconds.p90 * ratio * (1 - spread)
    hi = per_step / m.step_seconds.p10 * ratio * (1 + spread)
    model = _model_figures(est)
    fields = _with_speed(est, w, tps, [lo, hi])
    measured_total = _measured_total_gb(est_m, m)
    if measured_total is not None and est_m.memory_gb.total_per_gpu > 0:
        factor = measured_total / est_m.memory_gb.total_per_gpu
        total = est.memory_gb.total_per_gpu * factor
        fields["memory_gb"] = _memory(est, total, None)
        mlo, mhi = est.range.get("total_per_gpu", [total, total])
        fields["range"]["total_per_gpu"] = [round(min(total, mlo * factor), 3), round(max(total, mhi * factor), 3)]
        usable = est.details.get("usable_vram_gb") if est.details else None
        if usable is not None:
            fields["fits"] = total <= float(usable)
    note = (f"scaled: {m.tokens_per_second:,.0f} tokens/s measured on {m.gpu_count}x {m.gpu} x model ratio "
            f"{ratio:.3f} = {tps:,.0f} tokens/s, from {_note(m)}")
    return _finish(est, fields, "scaled", m, note, model)


def with_measurements(
    est: Estimate, w: Workload, index: MeasurementIndex, base: EstimatorFn,
    memo: dict[tuple[str | None, str], Estimate] | None = None,
) -> Estimate:
    """``est`` (the model's estimate of ``w`` on ``est.gpu``) with the measurements that match it."""
    found = index.get(estimate_key(est, w))
    if not found:
        return est
    for m in found:
        if m.gpu == est.gpu and m.gpu_count == est.gpu_count:
            return on_measured_gpu(est, w, m)
    for m in found:
        if m.gpu == CPU or not m.fits:
            continue  # a CPU run says nothing of a GPU's speed; an OOM elsewhere says nothing here
        key = (m.id, est.gpu)
        est_m = memo.get(key) if memo is not None else None
        if est_m is None:
            try:
                est_m = base(_recipe_workload(w, m), m.gpu, m.gpu_count, None)
            except InvalidInput:
                continue
            if memo is not None:
                memo[key] = est_m
        return scaled_from(est, w, m, est_m)
    return est


def measured_estimator(base: EstimatorFn, measurements: Sequence[Measurement]) -> EstimatorFn:
    """``base`` whose estimates use ``measurements``; ``base`` itself when there are none.

    Not declared a wrapper of ``base`` (no ``functools.wraps``): the planner's cost floors and
    the kept configurations assume the model's figures, which a measurement may beat."""
    if not measurements:
        return base
    index = MeasurementIndex(measurements)
    memo: dict[tuple[str | None, str], Estimate] = {}

    def estimator(workload: Workload, gpu: str, gpu_count: int = 1, sharding: str | None = None,
                  **kwargs: Any) -> Estimate:
        est = base(workload, gpu, gpu_count, sharding, **kwargs)
        return with_measurements(est, workload, index, base, memo)

    return estimator


def cpu_estimate(w: Workload, measurements: Sequence[Measurement], base: EstimatorFn,
                 reference_gpu: str = "H100") -> Estimate:
    """The estimate of ``w`` on the CPU: only from a stored CPU measurement of it.

    The estimator has no CPU model; the measurement gives speed and time, and ``reference_gpu``'s
    estimate of the same recipe gives what does not depend on the device (parameters, FLOPs, host
    needs). Raises InvalidInput naming ``gpu`` when nothing measured matches."""
    cpu = [m for m in measurements if m.gpu == CPU and m.fits]
    mb, ckpt = w.micro_batch_size, w.gradient_checkpointing

    def matches(m: Measurement) -> bool:
        mw = m.workload
        wanted = w.model_copy(update={
            "micro_batch_size": mw.micro_batch_size if mb == "auto" else mb,
            "gradient_checkpointing": mw.gradient_checkpointing if ckpt == "auto" else ckpt,
        })
        return measurement_key(m) == recipe_key(wanted, wanted.micro_batch_size,  # type: ignore[arg-type]
                                                wanted.gradient_checkpointing,  # type: ignore[arg-type]
                                                precision_on(w.precision, CPU))

    found = sorted((m for m in cpu if matches(m)), key=lambda m: m.measured_at, reverse=True)
    if not found:
        raise InvalidInput(
            "gpu", "cpu: the estimator has no CPU model; an estimate on cpu comes from a stored measurement of "
            "this workload (gpucost probe --device cpu, then gpucost measurements add), and none matches",
        )
    m = found[0]
    ref = base(_recipe_workload(w, m), reference_gpu, 1, None)
    ref = ref.model_copy(update={"gpu": CPU, "gpu_count": 1, "gpu_vram_gb": 0.0, "warnings": (), "suggestions": ()})
    est = on_measured_gpu(ref, w, m)
    return est.model_copy(update={"notes": (
        *est.notes, f"cpu: memory and host figures are the model's for this recipe ({reference_gpu}'s), "
        "a CPU run has no GPU memory to measure")})
