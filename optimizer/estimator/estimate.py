"""One estimate: does the job fit on ``gpu_count`` x ``gpu``, how fast, how long, what host.

``estimate`` is called for every distinct (GPU, count, sharding) of a quote, thousands of times,
so results are memoized on ``Workload.cache_key()``.
"""

from __future__ import annotations


from functools import lru_cache

from optimizer.errors import InvalidInput
from optimizer.estimator.gpus import GpuSpec, canonical_gpu, gpu_spec
from optimizer.estimator.host import host_needs, host_notes
from optimizer.estimator.memory import GB, MemoryParts, memory_parts
from optimizer.estimator.shapes import ModelShape, resolve_model
from optimizer.results import Estimate, MemoryBreakdown
from optimizer.estimator.throughput import run_hours, throughput, train_flops
from optimizer.estimator.workload import Workload

# Lightest first: each step shards more state at the price of more communication.
AUTO_ORDER = ("ddp", "zero2", "zero3")
GIB_PER_GB = 2**30 / 1e9


def usable_vram_gb(gpu: GpuSpec) -> float:
    """What an estimate may use: the card's nominal size read as GB (1e9 B).

    Marketed sizes are binary (a "24 GB" card holds 24 GiB = 25.8 GB); the ~7% difference is kept
    as headroom for the driver, other processes and allocator spikes the estimate does not see.
    """
    return gpu.vram_gb


def resolve_sharding(workload_sharding: str, gpu_count: int) -> list[str]:
    """Sharding schemes a candidate with ``gpu_count`` GPUs may use, lightest first."""
    if gpu_count <= 1:
        return ["ddp"]
    if workload_sharding == "auto":
        return list(AUTO_ORDER)
    return [workload_sharding]


def _round(x: float, nd: int = 3) -> float:
    return float(round(x, nd))


@lru_cache(maxsize=256)
def _public(shape: ModelShape) -> dict[str, object]:
    return shape.public()


def _memory_gb(mem: MemoryParts) -> MemoryBreakdown:
    return MemoryBreakdown.model_construct(
        weights=_round(mem.weights / GB),
        gradients=_round(mem.gradients / GB),
        optimizer=_round(mem.optimizer / GB),
        # Logits and transient buffers are activation-sized working memory.
        activations=_round((mem.activations + mem.logits + mem.temporary) / GB),
        overhead=_round(mem.overhead / GB),
        total_per_gpu=_round(mem.total / GB),
    )


def _one(shape: ModelShape, w: Workload, gpu: GpuSpec, gpu_count: int, sharding: str, tried: list[str]) -> Estimate:
    mem = memory_parts(shape, w, gpu, gpu_count, sharding)
    tp = throughput(shape, w, gpu, gpu_count, sharding, mem)
    hours, hour_parts = run_hours(w.total_tokens, tp.tokens_per_second, shape, w, mem, gpu_count, sharding)
    host = host_needs(shape, w, mem, gpu_count, tp.tokens_per_second, sharding)
    usable = usable_vram_gb(gpu)
    total_gb = mem.total / GB
    fits = total_gb <= usable

    notes: list[str] = []
    if not fits:
        notes.append(
            f"needs {total_gb:.1f} GB per GPU but {gpu.name} holds {usable:.1f} GB"
            + ("; more GPUs under DDP do not help (each holds a full copy)" if sharding == "ddp" else "")
        )
    if w.flash_attention and not mem.flash_attention:
        notes.append(
            f"{gpu.name} predates FlashAttention-2 (Ampere+): attention scores are kept, "
            f"{w.seq_len}x{w.seq_len} per head"
        )
    if w.precision in ("bf16", "bf16-true") and not gpu.supports_bf16:
        notes.append(f"{gpu.name} has no bf16 tensor cores: bf16 runs at fp32 speed; use fp16")
    if w.method == "qlora" and w.precision == "fp32":
        notes.append("QLoRA computes in 16 bits; fp32 precision only changes adapter and activation sizes")
    notes.extend(host_notes(host))

    # model_construct: every value here is already of its field's type, and this runs hundreds of
    # times per quote.
    return Estimate.model_construct(
        params=shape.params,
        trainable_params=mem.trainable_params,
        memory_gb=_memory_gb(mem),
        gpu=gpu.name,
        gpu_count=gpu_count,
        gpu_vram_gb=gpu.vram_gb,
        fits=fits,
        sharding=sharding,
        train_flops=float(f"{train_flops(shape, w):.6e}"),
        tokens_per_second=_round(tp.tokens_per_second, 1),
        mfu=_round(tp.mfu, 4),
        hours=_round(hours, 4),
        host=host.needs,
        notes=tuple(notes),
        # Detail figures are rounded when serialised (Estimate.details), not here: this runs
        # hundreds of times per quote and most details are never shown.
        details={
            "model": _public(shape),
            "usable_vram_gb": usable,
            "physical_vram_gb": gpu.vram_gb * GIB_PER_GB,
            "memory_parts_gb": {
                "logits": mem.logits / GB,
                "temporary": mem.temporary / GB,
                "saved_activations": mem.activations / GB,
                "cuda_context": mem.context / GB,
                "fragmentation": mem.fragmentation / GB,
                "allocated_peak": mem.allocated_peak / GB,
            },
            "flash_attention": mem.flash_attention,
            "model_flops_per_token": tp.model_flops_per_token,
            "hardware_flops_per_token": tp.hardware_flops_per_token,
            "peak_tflops_per_gpu": tp.peak_tflops,
            "step_seconds": {
                "compute": tp.compute_seconds,
                "memory_bound": tp.memory_seconds,
                "communication": tp.comm_seconds,
                "total": tp.step_seconds,
            },
            "hours_parts": dict(hour_parts),
            "host_ram_parts_gb": host.ram_parts_gb,
            "host_disk_parts_gb": host.disk_parts_gb,
            "dataloader_workers": host.dataloader_workers,
            "sharding_tried": tried,
        },
    )


_CACHE: dict[tuple[str, str, int, str], Estimate] = {}
_CACHE_MAX = 65536


def _estimate_cached(w: Workload, gpu_name: str, gpu_count: int, sharding: str) -> Estimate:
    key = (w.cache_key(), gpu_name, gpu_count, sharding)
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        hit = _CACHE[key] = _estimate_uncached(w, gpu_name, gpu_count, sharding)
    return hit


def _estimate_uncached(w: Workload, gpu_name: str, gpu_count: int, sharding: str) -> Estimate:
    shape = resolve_model(w.model)
    gpu = gpu_spec(gpu_name)
    schemes = resolve_sharding(sharding, gpu_count)
    tried: list[str] = []
    best: Estimate | None = None
    for scheme in schemes:
        tried.append(scheme)
        est = _one(shape, w, gpu, gpu_count, scheme, tried.copy())
        if best is None or est.memory_gb.total_per_gpu < best.memory_gb.total_per_gpu:
            best = est
        if est.fits:
            return est
    assert best is not None  # schemes is never empty
    return best


def estimate(workload: Workload, gpu: str, gpu_count: int = 1, sharding: str | None = None) -> Estimate:
    """Predicted memory, speed, time and host needs of ``workload`` on ``gpu_count`` x ``gpu``.

    ``sharding`` None uses ``workload.sharding``; ``"auto"`` takes the lightest scheme that fits
    (one GPU: plain data parallel; several: ddp, then zero2, then zero3).
    """
    if gpu_count < 1:
        raise InvalidInput("gpu_count", "must be at least 1")
    scheme = sharding or workload.sharding
    if scheme == "none":  # "no sharding" as some callers spell it
        scheme = "ddp"
    if scheme not in ("ddp", "zero1", "zero2", "zero3", "fsdp", "auto"):
        raise InvalidInput("sharding", f"unknown sharding {scheme!r}")
    # Resolve names first so bad input fails with the right field before the cache.
    resolve_model(workload.model)
    canon = canonical_gpu(gpu)
    # Estimates are frozen models shared through the cache; nothing copies them.
    return _estimate_cached(workload, canon, gpu_count, scheme)


def clear_cache() -> None:
    """Forget memoized estimates (after calibration constants change)."""
    _CACHE.clear()


def choose_sharding(workload: Workload, gpu: str, gpu_count: int) -> str:
    """The sharding ``estimate`` picks under ``auto``."""
    return estimate(workload, gpu, gpu_count, "auto").sharding
