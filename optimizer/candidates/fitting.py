"""From an estimate to what an option runs: the same global batch, headroom on the card, idle GPUs.

Shared by cloud and local option generation (``batch`` and ``headroom`` hold the rules)."""

from __future__ import annotations

from dataclasses import dataclass

from optimizer.candidates.amounts import amount_key, moved_estimate
from optimizer.candidates.batch import idle_warning, recipe_reason
from optimizer.candidates.estimator import Estimator, _estimate, is_product_estimator
from optimizer.candidates.headroom import is_safe, safer, tight_warning
from optimizer.candidates.rejections import NO_VRAM_MARGIN
from optimizer.estimator.amounts import BASIS_KEY, AmountBasis
from optimizer.estimator.estimate import memory_figures, on_clear
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.workload import Workload
from optimizer.results import Estimate


# Not frozen, though nothing assigns to it: a quote builds one per (card, count) or more, and a
# frozen dataclass's __init__ sets each field through object.__setattr__ (4x the time).
@dataclass(slots=True)
class Settled:
    est: Estimate | None  # None: rejected for ``reason``
    reason: str | None
    warnings: tuple[str, ...] = ()


# What ``settle`` makes of the product's own estimates depends on memory and the recipe, never on
# the amount of training (tokens, samples, epochs): it is kept per workload without its amount, and
# what it chose is moved to another amount as a kept estimate is (``candidates.amounts``). A quote
# that only changes the amount then searches no headroom again (local builds near their card's
# capacity did, each time). Bounded like the estimator's memos, forgotten with them. An entry holds
# an estimate only where ``settle`` chose another one: the estimate it was given stays the caller's.
_SETTLED: LruMemo[tuple[object, ...], tuple[str, Settled]] = LruMemo(4096)
on_clear(_SETTLED.clear)


def settle(
    estimator: Estimator,
    workload: Workload,
    est: Estimate,
    *,
    gpus: int,
    used: int,
    sharding: str | None,
    margin: float | None,
    across_amounts: bool = False,
) -> Settled:
    """``est`` (on ``used`` of the option's ``gpus``) checked for the global batch and headroom.

    A fitting but tight recipe is swapped for the fastest one with headroom; without one it stays
    with a warning, or is rejected when the request set ``safety_margin``. Estimates that do not fit
    pass through unchanged (the caller rejects them for VRAM). ``est``: the estimator's estimate of
    ``workload`` on ``used`` x its GPU under ``sharding``. ``across_amounts``: keep the choice for
    other amounts of training (``_SETTLED``), for callers whose results are not kept otherwise
    (cloud configurations are, with what they settled: ``cloud._kept``)."""
    if not across_amounts or not is_product_estimator(estimator) or not isinstance(
        est.details.get(BASIS_KEY) if est.details else None, AmountBasis
    ):
        return _settle(estimator, workload, est, gpus, used, sharding, margin)
    # The estimate is the estimator's for these: its amount-free figures only guard the key.
    key = (amount_key(workload), est.gpu, used, sharding, gpus, margin,
           est.fits, est.memory_gb.total_per_gpu, est.tokens_per_second)

    def compute() -> tuple[str, Settled]:
        got = _settle(estimator, workload, est, gpus, used, sharding, margin)
        if got.est is None:
            return "rejected", got
        if got.est is est:
            return "given", Settled(None, None, got.warnings)
        return "chosen", got

    how, kept = _SETTLED.get_or_compute(key, compute)
    if how == "rejected":
        return kept
    if how == "given":  # the estimate given, as it is
        return Settled(est, None, kept.warnings)
    assert kept.est is not None
    moved = moved_estimate(kept.est, workload)
    assert not isinstance(moved, str)
    return Settled(moved, None, kept.warnings)


def _settle(estimator: Estimator, workload: Workload, est: Estimate, gpus: int, used: int, sharding: str | None,
            margin: float | None) -> Settled:
    """``settle`` itself, with nothing kept."""
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
        est = est.model_copy(update={"recipe": est.recipe.model_copy(update={"idle_gpus": idle})})
        warnings.append(idle_warning(idle, gpus, workload.global_batch_size))
    return Settled(est, None, tuple(warnings))
