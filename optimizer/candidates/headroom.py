"""Headroom: prefer a recipe that fits the card at the upper end of its memory range.

The estimator picks the fastest recipe whose point estimate fits. An option generated from it may
then sit at 98 % of its card, where a real run can run out of memory (the estimate's range says
how far the truth may lie above the point). So option generation checks each fitting estimate:

* ``safety_margin`` None (default): the recipe is *safe* when the range's upper end fits the card
  and the point stays below ``NEAR_CAPACITY`` of it. A tight recipe is replaced by the fastest safe
  one (a smaller micro-batch, or checkpointing, where the request left them ``auto``); when none
  exists the tight one stays, with a warning the option carries.
* ``safety_margin`` m: the point estimate must stay within ``(1 - m)`` of the card; a recipe that
  cannot is rejected (``NO_VRAM_MARGIN``): the user traded cost for that certainty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from optimizer.estimator.construct import replaced
from optimizer.estimator.estimate import MemoryFigures
from optimizer.estimator.ranges import NEAR_CAPACITY
from optimizer.estimator.recipe import concrete_workload, divisors, per_gpu_share
from optimizer.estimator.workload import Workload
from optimizer.results import Estimate

Checkpointing = bool | Literal["offload"]
EstimateFn = Callable[[Workload, str, int, "str | None"], "Estimate | str"]
FiguresFn = Callable[[Workload, str, int, "str | None"], "MemoryFigures | None"]


def usable_gb(est: Estimate) -> float:
    v = est.details.get("usable_vram_gb") if est.details else None
    return float(v) if isinstance(v, int | float) else float(est.gpu_vram_gb)


def upper_gb(est: Estimate) -> float:
    rng = est.range.get("total_per_gpu") if est.range else None
    return float(rng[1]) if rng else est.memory_gb.total_per_gpu


def is_safe(est: Estimate, margin: float | None) -> bool:
    return _safe(est.memory_gb.total_per_gpu, upper_gb(est), usable_gb(est), margin)


def _safe(point: float, upper: float, usable: float, margin: float | None) -> bool:
    if margin is not None:
        return point <= usable * (1.0 - margin)
    return upper <= usable and point < NEAR_CAPACITY * usable


TIGHT_PREFIX = "tight fit:"


def tight_warning(est: Estimate) -> str:
    usable = usable_gb(est)
    point = est.memory_gb.total_per_gpu
    return (
        f"{TIGHT_PREFIX} {point:.1f} of {usable:.0f} GB on {est.gpu} ({point / usable:.0%}), upper end of the "
        f"estimate {upper_gb(est):.1f} GB; no recipe with more headroom fits, so a real run may run out of "
        "memory (set safety_margin to rule such options out)"
    )


def _tries(w: Workload, est: Estimate) -> list[tuple[int, Checkpointing]]:
    """Recipes with less memory than ``est``'s, fastest first within each checkpointing choice."""
    r = est.recipe
    assert r is not None
    micro_free = w.micro_batch_size == "auto" and w.gradient_accumulation_steps is None
    share = per_gpu_share(w.global_batch_size, r.data_parallel_gpus)
    micros = [m for m in divisors(share) if m <= r.micro_batch_size] if micro_free else [r.micro_batch_size]
    micros.sort(reverse=True)
    ckpts = [r.gradient_checkpointing]
    if w.gradient_checkpointing == "auto" and not r.gradient_checkpointing:
        ckpts.append(True)
    out: list[tuple[int, Checkpointing]] = []
    for c in ckpts:
        out.extend((m, c) for m in micros if (m, c) != (r.micro_batch_size, r.gradient_checkpointing))
    return out


def safer(
    estimate: EstimateFn, w: Workload, est: Estimate, count: int, sharding: str | None, margin: float | None,
    figures: FiguresFn | None = None,
) -> Estimate | None:
    """The fastest safe recipe for the same GPUs and sharding, or None. At most one safe recipe per
    checkpointing choice is looked at beyond the misses (the largest safe micro-batch is the
    fastest of its choice).

    ``figures``: the memory figures ``estimate`` would give a recipe (``estimator.memory_figures``,
    for the product's estimator only), so that the recipes found tight or too large, most of those
    tried, and a safe one slower than another, are never estimated; None for a recipe it cannot
    tell, which is estimated."""
    if est.recipe is None:
        return None
    # Safe recipes in the order found: an estimate, or the figures of one not made yet.
    found: list[tuple[float, Estimate | tuple[Workload, MemoryFigures]]] = []
    done: set[Checkpointing] = set()
    for micro, ckpt in _tries(w, est):
        if ckpt in done:
            continue
        cw = concrete_workload(w, est.recipe.data_parallel_gpus, micro, ckpt)
        seen = figures(cw, est.gpu, count, sharding) if figures is not None else None
        if seen is not None:
            if seen.fits and _safe(seen.point_gb, seen.upper_gb, seen.usable_gb, margin):
                found.append((seen.tokens_per_second(), (cw, seen)))
                done.add(ckpt)
            continue
        trial = estimate(cw, est.gpu, count, sharding)
        if isinstance(trial, str) or not trial.fits or trial.recipe is None:
            continue
        if is_safe(trial, margin):
            found.append((trial.tokens_per_second, trial))
            done.add(ckpt)
    if not found:
        return None
    best = max(found, key=lambda f: f[0])[1]  # the first of the fastest, as before
    if isinstance(best, tuple):
        made = estimate(best[0], est.gpu, count, sharding)
        if (isinstance(made, str) or not made.fits or made.recipe is None or not is_safe(made, margin)
                or made.tokens_per_second != best[1].tokens_per_second()):
            # The figures are the estimate's own (a unit test holds them to it); were they ever
            # not, the search runs as it does without them.
            return safer(estimate, w, est, count, sharding, margin)
        best = made
    assert best.recipe is not None  # only estimates with a recipe were kept
    # What the request left to ``auto`` is still what was chosen here.
    return replaced(best, recipe=replaced(best.recipe, chosen=est.recipe.chosen))
