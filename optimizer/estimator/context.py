"""The longest sequence that fits a card: a binary search over ``seq_len`` on the memory model.

Peak memory grows with the sequence (activations, logits, attention scores without a fused
kernel), so the largest fitting length is found in ~20 evaluations. Used by the docs' context
table and ``bench/estimator_accuracy.py`` against published maximum-context tables.
"""

from __future__ import annotations

from dataclasses import replace

from optimizer.estimator.gpus import GpuSpec, gpu_spec
from optimizer.estimator.memory import GB, memory_parts
from optimizer.estimator.precision import with_precision
from optimizer.estimator.shapes import resolve_model
from optimizer.estimator.workload import Workload

MAX_SEQ = 1_048_576  # the Workload's own bound on seq_len


def longest_context(w: Workload, gpu: str | GpuSpec, gpu_count: int = 1, sharding: str = "ddp",
                    vram_gb: float | None = None) -> int:
    """Largest ``seq_len`` whose predicted peak per GPU fits ``gpu`` (0: not even one token).

    ``w`` must give its micro-batch and checkpointing; ``vram_gb`` replaces the card's size (to
    ask "on a 12 GB card" with a given card's kernels).
    """
    spec = gpu_spec(gpu) if isinstance(gpu, str) else gpu
    if vram_gb is not None:
        spec = replace(spec, vram_gb=vram_gb)
    if w.micro_batch_size == "auto" or w.gradient_checkpointing == "auto":
        raise ValueError("longest_context needs an explicit micro_batch_size and gradient_checkpointing")
    shape = resolve_model(w.model)
    cw = with_precision(w, spec)
    accum = w.gradient_accumulation_steps or 1

    def fits(seq: int) -> bool:
        trial = cw.model_copy(update={"seq_len": seq, "gradient_accumulation_steps": accum})
        return memory_parts(shape, trial, spec, gpu_count, sharding).total / GB <= spec.vram_gb

    if not fits(1):
        return 0
    lo, hi = 1, MAX_SEQ
    if fits(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
