"""The amount of training (tokens, samples, epochs, dataset size) apart from everything else.

Memory, speed and the recipe of an estimate do not depend on how much is trained; a run's
tokens, FLOPs, hours and its dataset's share of host RAM and disk do. So the estimator memoises
its expensive part on ``Workload.rate_key()`` (the workload without ``AMOUNT_FIELDS``) and derives
the amount's figures here, from the memory and throughput it kept: a quote that only changes
``tokens`` costs no new memory model, recipe search or throughput model.

``figures`` is what the estimator itself computes an estimate's amount-dependent figures with, and
``at_amount`` recomputes them for another amount with the same pieces (``hours_at``,
``host.with_dataset``, ``host.needs_of``), so an estimate reached either way is the same, figure for
figure (``tests/unit/test_amounts.py`` holds it to that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from optimizer.estimator.construct import replaced
from optimizer.estimator.host import HostDetail, dataset_gb, host_needs, needs_of, with_dataset
from optimizer.estimator.memory import MemoryParts
from optimizer.estimator.ranges import rounded
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.throughput import RunTerms, Throughput, run_hours, run_terms, run_tokens
from optimizer.estimator.workload import AMOUNT_ORDER, Workload

if TYPE_CHECKING:
    from collections.abc import Callable

    from optimizer.results import Estimate

# Key in ``Estimate.details`` holding the estimate's ``AmountBasis`` (never serialised: the
# ``Estimate.details`` serializer leaves out keys that start with "_").
BASIS_KEY = "_amount"


# Its own __init__, which runs compiled (``optimizer.native``: a generated one would not).
@dataclass(slots=True, init=False)
class AmountBasis:
    """What an estimate's amount-dependent figures are computed from: the memory and throughput
    the estimator found for the (concrete) workload ``w``, on ``gpu_count`` GPUs under ``sharding``."""

    shape: ModelShape
    w: Workload
    mem: MemoryParts
    tp: Throughput
    gpu_count: int
    sharding: str

    def __init__(
        self, shape: ModelShape, w: Workload, mem: MemoryParts, tp: Throughput, gpu_count: int, sharding: str,
    ) -> None:
        self.shape = shape
        self.w = w
        self.mem = mem
        self.tp = tp
        self.gpu_count = gpu_count
        self.sharding = sharding


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class AmountFigures:
    hours: float  # rounded as the estimate shows it
    hour_parts: dict[str, float]
    host: HostDetail
    train_flops: float  # rounded as the estimate shows it

    def __init__(self, hours: float, hour_parts: dict[str, float], host: HostDetail, train_flops: float) -> None:
        self.hours = hours
        self.hour_parts = hour_parts
        self.host = host
        self.train_flops = train_flops


def hours_at(b: AmountBasis, tokens: float) -> tuple[float, dict[str, float]]:
    """A run's hours (rounded as the estimate shows them) and their parts when it trains ``tokens``
    (``run_tokens``) at ``b``'s speed: all the amount changes of them."""
    t = terms_of(b)
    hours, train_h, ckpt_h = run_hours(tokens, t)
    return shown_hours(hours), {
        "train_hours": train_h,
        "setup_hours": t.setup_hours,
        "download_hours": t.download_hours,
        "checkpoint_hours": ckpt_h,
    }


def terms_of(b: AmountBasis) -> RunTerms:
    """What ``b``'s run hours follow from besides the tokens (the same for every amount)."""
    return run_terms(b.tp.tokens_per_second, b.shape, b.w, b.mem, b.gpu_count)


def shown_hours(hours: float) -> float:
    """A run's hours as an estimate shows them."""
    return rounded(hours, 4)


def figures(b: AmountBasis) -> AmountFigures:
    """A run's hours, host needs and FLOPs for ``b.w``'s amount of training."""
    w = b.w
    tps = b.tp.tokens_per_second
    hours, parts = hours_at(b, run_tokens(b.shape, w))
    host = host_needs(b.shape, w, b.mem, b.gpu_count, tps, b.sharding, b.tp.samples_per_second)
    return AmountFigures(
        hours=hours,
        hour_parts=dict(parts),
        host=host,
        # ``train_flops`` from the per-token figure the throughput already holds.
        train_flops=_flops(b.tp, run_tokens(b.shape, w)),
    )


def _flops(tp: Throughput, tokens: float) -> float:
    """A run's model FLOPs, rounded as the estimate shows them, from the throughput's per-token figure."""
    return float(f"{tp.model_flops_per_token * tokens:.6e}")


@dataclass(frozen=True, slots=True)
class AmountInputs:
    """What a workload's amount of training is, as the amount-dependent figures take it: the run's
    tokens (images for a CNN) and its dataset's tokenized and raw size."""

    tokens: float
    cache_gb: float
    raw_gb: float


_LAST_INPUTS: tuple[Workload | None, ModelShape | None, AmountInputs | None] = (None, None, None)


def amount_inputs(shape: ModelShape, w: Workload) -> AmountInputs:
    """``w``'s amount for ``shape``: the same for every GPU, count and recipe of ``w``, so computed
    once per request (the last one is kept)."""
    global _LAST_INPUTS
    last = _LAST_INPUTS
    if last[0] is w and last[1] is shape and last[2] is not None:
        return last[2]
    cache, raw = dataset_gb(shape, w)
    got = AmountInputs(run_tokens(shape, w), cache, raw)
    _LAST_INPUTS = (w, shape, got)
    return got


_LAST_KIND: tuple[Workload | None, tuple[str, ...]] = (None, ())


def amount_kind(w: Workload) -> tuple[str, ...]:
    """Which ``AMOUNT_FIELDS`` ``w`` gives (an image model refuses tokens but takes samples)."""
    global _LAST_KIND
    last = _LAST_KIND
    if last[0] is w:
        return last[1]
    kind = tuple(f for f, v in zip(AMOUNT_ORDER, w.amount(), strict=True) if v is not None)
    _LAST_KIND = (w, kind)
    return kind


def moving_parts(est: Estimate) -> tuple[AmountBasis, dict[str, float], dict[str, float]] | None:
    """What ``est``'s amount figures are recomputed from: its basis and its host's RAM and disk
    parts, which the estimator writes together (``estimate._one``); None when it has no basis (not
    made by the estimator's model: nothing of it follows the amount)."""
    details = est.details
    basis = details.get(BASIS_KEY) if details else None
    if not isinstance(basis, AmountBasis):
        return None
    return basis, details["host_ram_parts_gb"], details["host_disk_parts_gb"]


def same_amount(est: Estimate, w: Workload) -> bool:
    """Whether ``est`` already holds ``w``'s amount of training (or has no basis to move)."""
    basis = est.details.get(BASIS_KEY) if est.details else None
    return not isinstance(basis, AmountBasis) or basis.w.amount() == w.amount()


def at_amount(est: Estimate, w: Workload, check: Callable[[ModelShape, Workload], None] | None = None) -> Estimate:
    """``est`` (memoised for some amount of training) for the amount ``w`` asks for.

    ``check``: the estimator's validation of the amount against the model (image models count
    samples, not tokens), run whenever the amount differs. An estimate without a basis (not made
    by the estimator's model) is returned as it is.

    Only the run's hours, FLOPs and the dataset's RAM and disk follow the amount, so they are all
    that is recomputed: the hours and FLOPs as ``figures`` computes them, the host's RAM and disk
    parts by putting the new dataset into the estimate's own (``host.with_dataset``, which
    ``host_needs`` builds them with) and summing them as ``host_needs`` does (``host.needs_of``).
    ``tests/unit/test_amounts.py`` holds a moved estimate to the one computed cold, field for field."""
    parts = moving_parts(est)
    if parts is None:
        return est
    basis, ram_parts, disk_parts = parts
    want = w.amount()
    if basis.w.amount() == want:
        return est
    if check is not None:
        check(basis.shape, w)
    moved = AmountBasis(basis.shape, basis.w.model_copy(update=dict(zip(AMOUNT_ORDER, want, strict=True))),
                        basis.mem, basis.tp, basis.gpu_count, basis.sharding)
    a = amount_inputs(basis.shape, w)
    hours, hour_parts = hours_at(moved, a.tokens)
    ram, disk = with_dataset(ram_parts, disk_parts, a.cache_gb, a.raw_gb)
    moved_details = {
        **est.details,
        "hours_parts": hour_parts,
        "host_ram_parts_gb": ram,
        "host_disk_parts_gb": disk,
        BASIS_KEY: moved,
    }
    return replaced(est, hours=hours, train_flops=_flops(basis.tp, a.tokens),
                    host=needs_of(ram, est.host.cpu_cores, disk), details=moved_details)
