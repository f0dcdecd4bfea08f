"""How option generation calls the estimator: its signature, sharding choices, and GPU
names resolved once."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from optimizer.candidates.rejections import UNSUPPORTED
from optimizer.errors import GpucostError, UnknownModel, UnsupportedConfig
from optimizer.estimator import calibration as cal
from optimizer.estimator.estimate import Unfit, estimate_or_unfit
from optimizer.estimator.gpus import find_gpu, gpu_family
from optimizer.estimator.workload import Constraints, Workload
from optimizer.results import Estimate

# Largest safetensors shard of a Hub checkpoint (transformers ``save_pretrained`` default "5GB").
CHECKPOINT_SHARD_GB = 5.0

Estimator = Callable[[Workload, str, int, "str | None"], Estimate]
ShardingChoices = Callable[[str, int], list[str]]
# What a request's memo holds per (GPU, count, scheme): the estimate, a rejection reason, or, from
# the product's estimator where nothing fits, only that (``estimate.Unfit``, ``estimate_or_unfit``).
Read = Estimate | str | Unfit


# Looked up once, then kept: option generation asks for it per configuration and per settled
# estimate (a function-level import each time was 0.6 % of a quote for a new token count).
@lru_cache(maxsize=1)
def default_estimator() -> Estimator:
    """The product's estimator; it memoises its own results (estimates are pure)."""
    from optimizer.estimator.estimate import estimate

    return estimate


def is_product_estimator(estimator: Estimator) -> bool:
    """Whether ``estimator`` is the product's, or a wrapper declaring it with ``functools.wraps``
    (which passes its estimates through): what is derived from its formulas without calling it (the
    plan's cost floors, kept configurations, the headroom search's memory figures) holds for it."""
    product = default_estimator()
    return estimator is product or inspect.unwrap(estimator) is product


@lru_cache(maxsize=1)
def default_shardings() -> ShardingChoices:
    from optimizer.estimator.estimate import resolve_sharding

    return resolve_sharding


def kept_across_requests(estimator: Estimator, shardings: ShardingChoices) -> bool:
    """Whether what option generation makes of ``estimator``'s estimates may be kept across
    requests and moved to another amount of training (the cloud groups' configurations, the local
    builds' sizes): with the product's estimator and sharding choices only."""
    return is_product_estimator(estimator) and shardings is default_shardings()


@lru_cache(maxsize=4096)
def _canonical(name: str) -> str | None:
    return find_gpu(name)


def _wanted_gpus(constraints: Constraints) -> set[str] | None:
    if not constraints.gpus:
        return None
    # A family name ("H100") asks for each of its boards (``gpus.gpu_family``).
    return {c for g in constraints.gpus for c in gpu_family(g, field="constraints.gpus")}


def _estimate(
    estimator: Estimator, workload: Workload, gpu: str, count: int, sharding: str | None
) -> Estimate | str:
    return _answer(estimator, workload, gpu, count, sharding)


R = TypeVar("R")


def _answer(f: Callable[[Workload, str, int, str | None], R], workload: Workload, gpu: str, count: int,
            sharding: str | None) -> R | str:
    """``f``'s answer for one card and count, or why the estimator cannot make it for this card."""
    try:
        return f(workload, gpu, count, sharding)
    except (UnknownModel, UnsupportedConfig):
        raise  # the request is wrong, not this GPU
    except GpucostError:
        return UNSUPPORTED


UnfitReader = Callable[[Workload, str, int, "str | None"], "Estimate | Unfit"]


def unfit_reader(estimator: Estimator) -> UnfitReader | None:
    """What gives ``estimator``'s estimate, or only that nothing fits where that is so
    (``estimate.estimate_or_unfit``): the product's own for the product's estimator; what a wrapper
    of it offers as ``or_unfit`` (the request guard's, which checks the request's deadline first,
    as its estimator does: ``service.api.limits.guarded_estimator``); None for any other."""
    if estimator is default_estimator():
        return estimate_or_unfit
    reader: UnfitReader | None = getattr(estimator, "or_unfit", None)
    return reader


def read_estimate(
    estimator: Estimator, reader: UnfitReader | None, workload: Workload, gpu: str, count: int, sharding: str | None
) -> Read:
    """``_estimate``, or where ``reader`` (``unfit_reader(estimator)``) is given, what it reads:
    for a caller that rejects a configuration on which nothing fits for its memory and reads
    nothing else of it."""
    if reader is None:
        return _estimate(estimator, workload, gpu, count, sharding)
    return _answer(reader, workload, gpu, count, sharding)


def made(estimator: Estimator, memo: dict[tuple[str, int, str | None], Read], workload: Workload,
         key: tuple[str, int, str | None]) -> Estimate | str:
    """The estimate ``memo`` holds under ``key``, made there if it holds none or only ``Unfit``."""
    est = memo.get(key)
    if est is None or isinstance(est, Unfit):
        est = memo[key] = _estimate(estimator, workload, key[0], key[1], key[2])
    return est


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class JobHost:
    """What the job itself needs of one node's host (up to 8 GPUs), and its per-run setup hours."""

    ram_gb: float
    cpu_cores: float
    setup_hours: float

    def __init__(self, ram_gb: float, cpu_cores: float, setup_hours: float) -> None:
        self.ram_gb = ram_gb
        self.cpu_cores = cpu_cores
        self.setup_hours = setup_hours


def job_ram_gb(ram_parts_gb: dict[str, float], gpu_count: int) -> float:
    """The RAM one node's share of the job uses, from the estimator's parts (``job_host``)."""
    loading, loading_real = loading_gb(ram_parts_gb, gpu_count)
    return float(sum(ram_parts_gb.values())) - loading + loading_real


def loading_gb(ram_parts_gb: dict[str, float], gpu_count: int) -> tuple[float, float]:
    """The checkpoint loading the estimator counts in RAM, and what a node really holds of it."""
    loading = float(ram_parts_gb.get("model_loading", 0.0))
    # Hub checkpoints are safetensors shards of at most ~5 GB (transformers' default
    # ``max_shard_size``), memory-mapped and moved to the GPU a shard at a time: a process's
    # resident peak while loading is about one shard, not the whole checkpoint.
    return loading, min(loading, CHECKPOINT_SHARD_GB * min(gpu_count, 8))


def whole_gpus(gpus_per_node: float) -> bool:
    """Whether an instance holds whole GPUs, not a partition (g6f: a quarter GPU)."""
    return gpus_per_node >= 1 and float(gpus_per_node).is_integer()


def host_share(gpus_per_node: float, total_gpus: float) -> tuple[bool, float]:
    """Whether an instance holds whole GPUs (``whole_gpus``), and the share of the estimator's host
    (sized for one node of up to 8 GPUs) one node of ``total_gpus`` needs."""
    whole = whole_gpus(gpus_per_node)
    return whole, (gpus_per_node / min(total_gpus, 8)) if whole else 1.0


def job_host(est: Estimate) -> JobHost:
    """RAM and cores the job needs (loading the checkpoint, the dataset cache, the dataloader
    workers, the system), without the floors the estimator adds as advice for building a machine
    (32 GB, 4 cores): a rental is judged on what the job uses. Falls back to ``est.host`` when the
    estimate carries no breakdown."""
    parts = est.details.get("host_ram_parts_gb") if est.details else None
    workers = est.details.get("dataloader_workers") if est.details else None
    ram = job_ram_gb(parts, est.gpu_count) if parts else est.host.ram_gb
    cores = (
        float(max(1, math.ceil(workers / cal.DATALOADER_CORE_SHARE.value)))
        if isinstance(workers, int | float) and workers > 0
        else float(est.host.cpu_cores)
    )
    hours_parts = est.details.get("hours_parts") if est.details else None
    setup = float(hours_parts.get("setup_hours", 0.0)) if hours_parts else 0.0
    return JobHost(ram, cores, setup)
