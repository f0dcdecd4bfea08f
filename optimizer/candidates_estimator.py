"""How option generation calls the estimator: its signature, memoisation, sharding choices, and GPU
names resolved once."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from optimizer.candidates_rejections import UNSUPPORTED
from optimizer.errors import GpucostError, UnknownModel, UnsupportedConfig
from optimizer.gpus import canonical_gpu, find_gpu
from optimizer.results import Estimate
from optimizer.workload import Constraints, Workload

Estimator = Callable[[Workload, str, int, "str | None"], Estimate]
ShardingChoices = Callable[[str, int], list[str]]


@lru_cache(maxsize=1)
def default_estimator() -> Estimator:
    """The product's estimator; it memoises its own results (estimates are pure)."""
    from optimizer.estimate import estimate

    return estimate


def cached_estimator(fn: Estimator, maxsize: int = 20_000) -> Estimator:
    """Memoise a pure estimator on (workload, gpu, count, sharding), for estimators that don't."""
    memo: dict[tuple[str, str, int, str | None], Estimate] = {}

    def run(workload: Workload, gpu: str, gpu_count: int, sharding: str | None) -> Estimate:
        key = (workload.cache_key(), gpu, gpu_count, sharding)
        hit = memo.get(key)
        if hit is None:
            if len(memo) >= maxsize:
                memo.clear()
            hit = memo[key] = fn(workload, gpu, gpu_count, sharding)
        return hit

    return run


def default_shardings() -> ShardingChoices:
    from optimizer.estimate import resolve_sharding

    return resolve_sharding


@lru_cache(maxsize=4096)
def _canonical(name: str) -> str | None:
    return find_gpu(name)


def _wanted_gpus(constraints: Constraints) -> set[str] | None:
    if not constraints.gpus:
        return None
    return {canonical_gpu(g, field="constraints.gpus") for g in constraints.gpus}


def _estimate(
    estimator: Estimator, workload: Workload, gpu: str, count: int, sharding: str | None
) -> Estimate | str:
    try:
        return estimator(workload, gpu, count, sharding)
    except (UnknownModel, UnsupportedConfig):
        raise  # the request is wrong, not this GPU
    except GpucostError:
        return UNSUPPORTED
