"""From step times to a ``Measurement``: warm-up until the steps settle, percentiles, MFU, the
device's name and what NVML reports, the software versions. Pure Python (no torch), shared by
``gpucost probe`` and the training-loop hooks.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from optimizer.estimator.gpus import find_gpu, gpu_spec
from optimizer.estimator.workload import Workload
from optimizer.measurement import CPU, Measurement, Source, StepSeconds, checked

GB = 1e9
# Warm-up ends when the coefficient of variation of the last SETTLE_WINDOW steps is under
# SETTLE_CV (after at least MIN_WARMUP steps: the first builds optimizer states and picks kernels).
SETTLE_WINDOW = 3
SETTLE_CV = 0.05
MIN_WARMUP = 2
SOFTWARE = ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "lightning", "pytorch-lightning", "gpucost")


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (population standard deviation over the mean)."""
    if len(values) < 2:
        return float("inf")
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean > 0 else float("inf")


def settled(times: Sequence[float], window: int = SETTLE_WINDOW, limit: float = SETTLE_CV,
            min_steps: int = MIN_WARMUP) -> bool:
    """Whether warm-up may end after ``times``: at least ``min_steps`` steps, and the last
    ``window`` of them within ``limit`` coefficient of variation."""
    return len(times) >= max(min_steps, window) and cv(times[-window:]) < limit


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by linear interpolation between order statistics."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def step_stats(times: Sequence[float]) -> StepSeconds:
    return StepSeconds(median=statistics.median(times), p10=percentile(times, 0.10), p90=percentile(times, 0.90))


def software_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in SOFTWARE:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def gpu_from_device_name(name: str) -> str | None:
    """gpucost's canonical name for a CUDA device name such as "NVIDIA H100 80GB HBM3": the
    longest leading run of words that names a known GPU."""
    words = name.replace("_", " ").split()
    for n in range(len(words), 0, -1):
        canon = find_gpu(" ".join(words[:n]))
        if canon is not None:
            return canon
    return None


def nvml_info(index: int) -> dict[str, float | str | None]:
    """Clocks, power limit and memory of CUDA device ``index`` as NVML reports them; empty when
    NVML (``nvidia-ml-py``) is not there."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: nothing to report
        return {}
    info: dict[str, float | str | None] = {}
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
        readers = {
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "power_limit_w": lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000.0,
            "memory_total_gb": lambda: pynvml.nvmlDeviceGetMemoryInfo(h).total / GB,
            "driver": lambda: str(pynvml.nvmlSystemGetDriverVersion()),
        }
        for key, read in readers.items():
            try:
                info[key] = read()
            except Exception:  # noqa: BLE001 - a field this device or driver does not report
                continue
    finally:
        pynvml.nvmlShutdown()
    return info


def mfu_of(workload: Workload, gpu: str, gpu_count: int, tokens_per_second: float) -> float | None:
    """Model FLOPs utilisation: the estimator's model FLOPs per token x tokens/s over the GPUs'
    dense peak at the workload's precision. None on the CPU (no peak in the catalog)."""
    if gpu == CPU:
        return None
    from optimizer.estimator.estimate import estimate

    est = estimate(workload, gpu, gpu_count, None)
    per_token = est.all_details.get("model_flops_per_token")
    peak = gpu_spec(gpu).peak_tflops(workload.precision) * 1e12 * gpu_count
    if not per_token or peak <= 0:
        return None
    return min(1.0, round(float(per_token) * tokens_per_second / peak, 4))


def build_measurement(
    workload: Workload, *, gpu: str, device_name: str, step_times: Sequence[float], warmup_steps: int,
    source: Source, gpu_count: int = 1, peak_reserved_bytes: float | None = None,
    peak_allocated_bytes: float | None = None, model_params: int | None = None,
    trainable_params: int | None = None, device: dict[str, Any] | None = None, notes: str = "",
    measured_at: datetime | None = None,
) -> Measurement:
    """The checked record of ``step_times`` (seconds per step, warm-up excluded) of ``workload``,
    whose micro-batch and checkpointing are the ones that ran."""
    stats = step_stats(step_times)
    mb = workload.micro_batch_size
    assert isinstance(mb, int)
    tokens_per_step = mb * workload.seq_len * gpu_count
    # At the median step: one step slowed by something else on the machine (another process, a
    # page fault) would move a mean, and the p10-p90 spread is kept beside it.
    tps = tokens_per_step / stats.median
    m = Measurement(
        workload=workload, gpu=gpu, gpu_count=gpu_count, device_name=device_name, steps=len(step_times),
        warmup_steps=warmup_steps, step_seconds=stats, tokens_per_second=round(tps, 3),
        samples_per_second=round(mb * gpu_count / stats.median, 4),
        peak_vram_gb=None if peak_reserved_bytes is None else round(peak_reserved_bytes / GB, 4),
        allocated_peak_gb=None if peak_allocated_bytes is None else round(peak_allocated_bytes / GB, 4),
        mfu=mfu_of(workload, gpu, gpu_count, tps), fits=True,
        measured_at=measured_at or datetime.now(UTC), software=software_versions(), source=source,
        model_params=model_params, trainable_params=trainable_params, device=dict(device or {}), notes=notes,
    )
    return checked(m)


def oom_measurement(
    workload: Workload, *, gpu: str, device_name: str, source: Source, model_params: int | None = None,
    device: dict[str, Any] | None = None, detail: str = "",
) -> Measurement:
    """The record of a run that ran out of memory: a fit boundary ("does not fit at micro-batch N")."""
    mb = workload.micro_batch_size
    note = f"does not fit at micro-batch {mb}" + (f": {detail[:300]}" if detail else "")
    m = Measurement(
        workload=workload, gpu=gpu, device_name=device_name, steps=1, warmup_steps=0, fits=False,
        measured_at=datetime.now(UTC), software=software_versions(), source=source, model_params=model_params,
        device=dict(device or {}), notes=note,
    )
    return checked(m)
