"""How option generation calls the estimator: its signature, sharding choices, and GPU
names resolved once."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from optimizer.candidates.rejections import UNSUPPORTED
from optimizer.errors import GpucostError, UnknownModel, UnsupportedConfig
from optimizer.estimator.gpus import canonical_gpu, find_gpu
from optimizer.results import Estimate
from optimizer.estimator.workload import Constraints, Workload

Estimator = Callable[[Workload, str, int, "str | None"], Estimate]
ShardingChoices = Callable[[str, int], list[str]]


def default_estimator() -> Estimator:
    """The product's estimator; it memoises its own results (estimates are pure)."""
    from optimizer.estimator.estimate import estimate

    return estimate


def default_shardings() -> ShardingChoices:
    from optimizer.estimator.estimate import resolve_sharding

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
