"""From an estimate to what an option runs: the same global batch, headroom on the card, idle GPUs.

Shared by cloud and local option generation (``batch`` and ``headroom`` hold the rules)."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.candidates.batch import idle_warning, recipe_reason
from optimizer.candidates.estimator import Estimator, _estimate, is_product_estimator
from optimizer.candidates.headroom import is_safe, safer, tight_warning
from optimizer.candidates.rejections import NO_VRAM_MARGIN
from optimizer.estimator.construct import replaced
from optimizer.estimator.estimate import memory_figures
from optimizer.estimator.workload import Workload
from optimizer.results import Estimate


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class Settled:
    est: Estimate | None  # None: rejected for ``reason``
    reason: str | None
    warnings: tuple[str, ...] = ()

    def __init__(self, est: Estimate | None, reason: str | None, warnings: tuple[str, ...] = ()) -> None:
        self.est = est
        self.reason = reason
        self.warnings = warnings


def settle(
    estimator: Estimator,
    workload: Workload,
    est: Estimate,
    *,
    gpus: int,
    used: int,
    sharding: str | None,
    margin: float | None,
) -> Settled:
    """``est`` (on ``used`` of the option's ``gpus``) checked for the global batch and headroom.

    A fitting but tight recipe is swapped for the fastest one with headroom; without one it stays
    with a warning, or is rejected when the request set ``safety_margin``. Estimates that do not fit
    pass through unchanged (the caller rejects them for VRAM). ``est``: the estimator's estimate of
    ``workload`` on ``used`` x its GPU under ``sharding``. What it chooses depends on memory and the
    recipe, never on the amount of training: the callers keep it across amounts with the rest of
    what they make (``cloud._kept``, ``local_sizes.sizes_at``)."""
    reason = recipe_reason(est, gpus)
    if reason is not None:
        return Settled(None, reason)
    warnings: list[str] = []
    if est.fits and not is_safe(est, margin):

        def call(w: Workload, gpu: str, count: int, s: str | None) -> Estimate | str:
            return _estimate(estimator, w, gpu, count, s)

        # The product's estimator tells tight recipes by their memory alone (``memory_figures``).
        figures = memory_figures if is_product_estimator(estimator) else None
        better = safer(call, workload, est, used, sharding, margin, figures)
        if better is not None:
            est = better
        elif margin is not None:
            return Settled(None, NO_VRAM_MARGIN)
        else:
            warnings.append(tight_warning(est))
    idle = gpus - used
    if idle > 0 and est.recipe is not None:
        est = replaced(est, recipe=replaced(est.recipe, idle_gpus=idle))
        warnings.append(idle_warning(idle, gpus, workload.global_batch_size))
    return Settled(est, None, tuple(warnings))
