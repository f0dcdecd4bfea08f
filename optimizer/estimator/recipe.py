"""The training recipe an option runs: micro-batch, gradient accumulation and checkpointing.

The global batch (sequences per optimizer step) is what the run means, so it is the same on every
option; how it is made up differs per GPU type and count:

    micro_batch_size x gradient_accumulation_steps x data-parallel GPUs = global_batch_size

(ZeRO and FSDP are data parallel too: every GPU takes its own micro-batch.) Under ``auto`` the
micro-batch is the largest that fits, because a larger micro-batch amortises the per-step weight
reads, kernel launches and weight gathers over more tokens and never runs slower per token (the
throughput model has no term that grows faster than the tokens of a step). Peak memory grows with
the micro-batch, so the largest fitting one is found by binary search over the candidates, not by
estimating each. Only divisors of the per-GPU share are candidates, so accumulation makes up the
global batch exactly; a global batch that the GPUs do not divide is rounded up to the next multiple
(one more sequence on some steps is what a data-parallel run does) and the recipe says so.

Checkpointing under ``auto`` is used where it is needed to fit at all, or where the larger
micro-batch it allows runs faster than the smaller one without it (recomputing the forward costs
about a third more compute); the caller compares the two speeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from optimizer.estimator.construct import constructed
from optimizer.estimator.workload import Workload
from optimizer.results import Recipe

MAX_MICRO_CANDIDATES = 4096  # divisors of per-GPU shares up to ~1e6 stay far below this


def per_gpu_share(global_batch_size: int, data_parallel_gpus: int) -> int:
    """Sequences each GPU takes per optimizer step (rounded up when the GPUs do not divide it)."""
    return max(1, math.ceil(global_batch_size / data_parallel_gpus))


@lru_cache(maxsize=1024)
def _divisors(n: int) -> tuple[int, ...]:
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    return tuple(small + large[::-1])


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n``, ascending."""
    return list(_divisors(n))


def largest_fitting(candidates: Sequence[int], fits: Callable[[int], bool]) -> int | None:
    """The largest candidate for which ``fits`` holds, given that it holds for every smaller one
    whenever it holds for a larger (memory grows with the micro-batch). ``candidates`` ascending."""
    if not candidates:
        return None
    # Where memory is plentiful the largest candidate fits: one probe instead of log2(n).
    if fits(candidates[-1]):
        return candidates[-1]
    lo, hi = 0, len(candidates) - 2
    best: int | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(candidates[mid]):
            best = candidates[mid]
            lo = mid + 1
        else:
            hi = mid - 1
    return best


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class Trial:
    """One concrete recipe: the workload to estimate and its description."""

    workload: Workload
    recipe: Recipe

    def __init__(self, workload: Workload, recipe: Recipe) -> None:
        self.workload = workload
        self.recipe = recipe


_CONCRETE: dict[tuple[str, int, int], Workload] = {}
_CONCRETE_MAX = 16384


def concrete_workload(w: Workload, data_parallel_gpus: int, micro: int, checkpointing: bool | str) -> Workload:
    """``w`` with micro-batch ``micro`` and checkpointing fixed, accumulation derived (or as given).

    Memoised (bounded): every GPU type with the same data-parallel count shares one copy, and with
    it the copy's content key the estimate cache looks up."""
    share = per_gpu_share(w.global_batch_size, data_parallel_gpus)
    accum = w.gradient_accumulation_steps or max(1, math.ceil(share / micro))
    if (w.micro_batch_size, w.gradient_checkpointing, w.gradient_accumulation_steps) == (micro, checkpointing, accum):
        return w
    mode = 2 if checkpointing == "offload" else int(checkpointing)
    key = (w.cache_key(), micro * 3 + mode, accum)
    hit = _CONCRETE.get(key)
    if hit is None:
        if len(_CONCRETE) >= _CONCRETE_MAX:
            _CONCRETE.clear()
        hit = _CONCRETE[key] = w.with_recipe(micro, checkpointing, accum)
    return hit


def recipe_for(w: Workload, data_parallel_gpus: int, sharding: str, micro: int, checkpointing: bool | str) -> Recipe:
    """What running ``w`` with ``micro`` and ``checkpointing`` on ``data_parallel_gpus`` means."""
    share = per_gpu_share(w.global_batch_size, data_parallel_gpus)
    accum = w.gradient_accumulation_steps or max(1, math.ceil(share / micro))
    chosen = tuple(
        name
        for name, value in (("micro_batch_size", w.micro_batch_size), ("gradient_checkpointing", w.gradient_checkpointing))
        if value == "auto"
    ) + (() if w.gradient_accumulation_steps is not None else ("gradient_accumulation_steps",))
    run_global = micro * accum * data_parallel_gpus
    notes: tuple[str, ...] = ()
    if run_global != w.global_batch_size:
        if w.micro_batch_size != "auto" and micro > share:
            why = f"micro-batch {micro} on each of {data_parallel_gpus} GPU(s) already exceeds it"
        elif w.gradient_accumulation_steps is not None:
            why = f"accumulation fixed at {accum}"
        else:
            why = f"{data_parallel_gpus} GPUs do not divide {w.global_batch_size}"
        notes = (f"global batch {run_global} per step instead of {w.global_batch_size}: {why}",)
    # model_construct (``constructed``: the same, faster): every value is already of its field's
    # type, and this runs per estimate.
    return constructed(
        Recipe,
        micro_batch_size=micro,
        gradient_accumulation_steps=accum,
        gradient_checkpointing=checkpointing,
        sharding=sharding,
        data_parallel_gpus=data_parallel_gpus,
        global_batch_size=run_global,
        requested_global_batch_size=w.global_batch_size,
        chosen=chosen,
        notes=notes,
        precision=w.precision,
    )


def concrete(w: Workload, data_parallel_gpus: int, sharding: str, micro: int, checkpointing: bool | str) -> Trial:
    """The workload to estimate and its recipe."""
    return Trial(
        concrete_workload(w, data_parallel_gpus, micro, checkpointing),
        recipe_for(w, data_parallel_gpus, sharding, micro, checkpointing),
    )


def micro_candidates(w: Workload, data_parallel_gpus: int) -> list[int]:
    """Micro-batches to search, ascending: the given one, or the divisors of the per-GPU share."""
    if w.micro_batch_size != "auto":
        return [int(w.micro_batch_size)]
    share = per_gpu_share(w.global_batch_size, data_parallel_gpus)
    if w.gradient_accumulation_steps is not None:
        return [max(1, math.ceil(share / w.gradient_accumulation_steps))]
    return divisors(share)[:MAX_MICRO_CANDIDATES]


def checkpointing_choices(w: Workload) -> list[bool | str]:
    """Without checkpointing first (it is faster at equal micro-batch). A choice is a bool or "offload":
    compiled (``optimizer.native``), a value its annotation does not admit raises ``TypeError``."""
    if w.gradient_checkpointing == "auto":
        return [False, True]
    if w.gradient_checkpointing == "offload":
        return ["offload"]
    return [bool(w.gradient_checkpointing)]


def given_recipe(w: Workload, data_parallel_gpus: int) -> tuple[int, bool | str] | None:
    """The micro-batch and checkpointing of a ``w`` that leaves neither to choose, else None."""
    micros = micro_candidates(w, data_parallel_gpus)
    ckpts = checkpointing_choices(w)
    if len(micros) == 1 and len(ckpts) == 1:
        return micros[0], ckpts[0]
    return None


def fitting_trials(
    w: Workload, data_parallel_gpus: int, sharding: str, fits: Callable[[Workload], bool]
) -> list[Trial]:
    """Per checkpointing choice, the largest-micro-batch recipe that fits (none: that choice cannot).

    A choice is dropped when another fits the same micro-batch without recomputing. A recipe given
    in full is returned as it is, fitting or not (the estimate says which).
    """
    given = given_recipe(w, data_parallel_gpus)
    if given is not None:
        # Nothing to choose: the estimate itself says whether it fits.
        return [concrete(w, data_parallel_gpus, sharding, *given)]
    micros = micro_candidates(w, data_parallel_gpus)
    ckpts = checkpointing_choices(w)
    out: list[Trial] = []
    for ckpt in ckpts:
        # Recomputing only pays if it allows a larger micro-batch than not recomputing does.
        floor = out[-1].recipe.micro_batch_size if out else 0
        search = [m for m in micros if m > floor]
        if not search:
            break
        m = largest_fitting(search, lambda mb: fits(concrete_workload(w, data_parallel_gpus, mb, ckpt)))
        if m is not None:
            out.append(concrete(w, data_parallel_gpus, sharding, m, ckpt))
    return out


def least_memory_trial(w: Workload, data_parallel_gpus: int, sharding: str) -> Trial:
    """The recipe needing the least memory among those allowed: what a non-fitting estimate shows."""
    micros = micro_candidates(w, data_parallel_gpus)
    return concrete(w, data_parallel_gpus, sharding, micros[0], checkpointing_choices(w)[-1])
