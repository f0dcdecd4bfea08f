"""``precision: "auto"``: the mixed precision a card actually trains in (CONTRACT v3).

bf16 autocast where the card has bf16 tensor cores (Ampere, Ada, Hopper, Blackwell, AMD CDNA);
fp16 autocast with loss scaling on Volta and Turing (V100, T4, RTX 20xx), which have fp16 tensor
cores only: bf16 there runs emulated at the fp32 rate (``effective_peak_tflops``), about 3-4x
slower, which is why everyone trains fp16 on them. An explicit precision is kept as given.

The choice is per option, like the micro-batch: ``estimate`` resolves it for each GPU type before
the memory and speed models run, and the estimate's ``recipe.precision`` says what was assumed.
"""

from __future__ import annotations

from optimizer.estimator.gpus import GpuSpec
from optimizer.estimator.workload import Workload

_RESOLVED: dict[tuple[str, bool], Workload] = {}
_RESOLVED_MAX = 16384


def auto_precision(gpu: GpuSpec | None) -> str:
    """What ``auto`` means on ``gpu`` (None: a card with bf16 tensor cores)."""
    if gpu is None or gpu.supports_bf16:
        return "bf16"
    return "fp16"


def resolve_precision(precision: str, gpu: GpuSpec | None) -> str:
    return auto_precision(gpu) if precision == "auto" else precision


def with_precision(w: Workload, gpu: GpuSpec | None) -> Workload:
    """``w`` with ``precision: "auto"`` replaced by the card's choice (``w`` itself otherwise).

    Memoised (bounded) on the workload's content and the card's bf16 support, so every GPU type
    with the same answer shares one copy and with it the estimate cache's key."""
    if w.precision != "auto":
        return w
    bf16 = gpu is None or gpu.supports_bf16
    key = (w.cache_key(), bf16)
    hit = _RESOLVED.get(key)
    if hit is None:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        hit = _RESOLVED[key] = w.with_precision_resolved("bf16" if bf16 else "fp16")
    return hit
