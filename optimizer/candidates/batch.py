"""The job is the job: every option trains the requested ``global_batch_size`` exactly.

micro-batch x gradient accumulation x data-parallel GPUs = global batch. When an option's GPUs do
not divide the batch, the option uses the most GPUs that do and leaves the others idle (paying for
them, and saying so in ``recipe.idle_gpus``), as long as at least half the GPUs train; otherwise it
is rejected with a reason that starts ``cannot keep global batch``. An estimate whose recipe runs a
different batch (a micro-batch or accumulation fixed by the request that does not add up) is
rejected the same way: a larger batch is a different training run (other step count, other
learning-rate schedule), so it is never offered as the same job.
"""

from __future__ import annotations

from optimizer.candidates.rejections import NO_GLOBAL_BATCH
from optimizer.estimator.recipe import divisors
from optimizer.results import Estimate, Recipe

# Below this share of an option's GPUs training, the option is mostly paying for idle cards.
MIN_USED_SHARE = 0.5


def data_parallel_width(global_batch_size: int, gpus: int) -> int | None:
    """GPUs of ``gpus`` that train: all when they divide the batch, else the largest count that
    divides it if that is at least ``MIN_USED_SHARE`` of them; None when none such exists."""
    if gpus <= 1 or global_batch_size % gpus == 0:
        return gpus
    best = max((d for d in divisors(global_batch_size) if d <= gpus), default=1)
    return best if best >= MIN_USED_SHARE * gpus else None


def cannot_keep(global_batch_size: int, gpus: int, why: str = "") -> str:
    """The rejection reason, e.g. ``cannot keep global batch 16 on 64 GPUs``."""
    return f"{NO_GLOBAL_BATCH} {global_batch_size} on {gpus} GPUs" + (f": {why}" if why else "")


def recipe_reason(est: Estimate, gpus: int) -> str | None:
    """A rejection reason when the estimate's recipe runs another global batch than requested."""
    return batch_reason(est.recipe, gpus)


def batch_reason(r: Recipe | None, gpus: int) -> str | None:
    """``recipe_reason`` of an estimate with recipe ``r``."""
    if r is None or r.global_batch_size == r.requested_global_batch_size:
        return None
    if r.micro_batch_size * r.data_parallel_gpus > r.requested_global_batch_size:
        why = f"micro-batch {r.micro_batch_size} x {r.data_parallel_gpus} GPUs already exceeds it"
    else:
        why = f"{r.micro_batch_size} x {r.gradient_accumulation_steps} x {r.data_parallel_gpus} GPUs = {r.global_batch_size}"
    return cannot_keep(r.requested_global_batch_size, gpus, why)


def idle_warning(idle: int, gpus: int, global_batch_size: int) -> str:
    return (
        f"{idle} of {gpus} GPUs idle: {gpus - idle} GPUs divide global batch {global_batch_size}, "
        "so the job stays the same; all are paid for"
    )
