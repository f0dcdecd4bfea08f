"""The sizes a local build may run a job at (units x sharding), kept across requests and moved to
another amount of training.

Which sizes a build's card takes (how many units, which sharding, the recipe ``settle`` chose, and
why the others are rejected before any price or deadline) follows from the workload without its
amount, the card, the GPUs per machine and the limits: not from the build's price, power or host,
and not from how much is trained. So, with the product's estimator, a build's sizes are kept per
workload without its amount (``amount_key``) like the cloud groups' configurations
(``cloud._kept``), and a request for another amount takes each live size's hours and the job's RAM
from the basis of its estimate (``amounts.job_figures``), with no estimate moved or copied. The
first time an entry moves, those figures must equal the estimates' own at the kept amount, exactly;
otherwise the entry's sizes are made anew for each request (``test_moved_configs.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from optimizer.candidates.amounts import amount_key, job_figures, take_read
from optimizer.candidates.batch import cannot_keep, data_parallel_width
from optimizer.candidates.estimator import (
    Estimator,
    JobHost,
    Read,
    ShardingChoices,
    job_host,
    kept_across_requests,
    made,
)
from optimizer.candidates.fitting import settle
from optimizer.candidates.rejections import TOO_MANY_GPUS, UNSUPPORTED
from optimizer.estimator.amounts import AmountBasis, amount_inputs, moving_parts, terms_of
from optimizer.estimator.estimate import on_clear
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.throughput import RunTerms
from optimizer.estimator.workload import Workload
from optimizer.results import Estimate

_Memo = dict[tuple[str, int, str | None], Read]


# Its own __init__, which runs compiled; not frozen, so that it can set the fields, though nothing
# else assigns to them (``optimizer.native``).
@dataclass(slots=True, unsafe_hash=True, init=False)
class Size:
    """One (units, sharding) a build's walk reached: rejected whatever the amount (``reason``), or
    the settled estimate it runs, with the job's host needs and the notes ``settle`` gave."""

    units: int
    reason: str | None = None
    est: Estimate | None = None  # at the amount the sizes were made for
    host: JobHost | None = None  # ``job_host(est)``
    notes: tuple[str, ...] = ()

    def __init__(
        self, units: int, reason: str | None = None, est: Estimate | None = None, host: JobHost | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.units = units
        self.reason = reason
        self.est = est
        self.host = host
        self.notes = notes


# A size with the run's hours and the job's host for a request's amount (None: rejected whatever it is).
Sized = tuple[Size, float | None, JobHost | None]


def _as_made(made: list[Size]) -> list[Sized]:
    """The sizes with their estimates' own hours: at the amount they were made for."""
    return [(s, s.est.hours if s.est is not None else None, s.host) for s in made]


def sizes(
    workload: Workload, gpu: str, gpu_count: int, *, max_gpus: int, max_units: int, margin: float | None,
    estimator: Estimator, shardings: ShardingChoices, memo: _Memo, read: _Memo | None = None,
) -> list[Size]:
    """A build of ``gpu_count`` x ``gpu`` per machine at 1 to ``max_units`` machines, each under the
    shardings a local cluster may use (``_local_shardings``), in the order they are tried. Estimates
    come from the request's ``memo`` (the cloud groups' estimates of the same card and count) or
    go into it; ``read``: also every estimate read, by key."""
    out: list[Size] = []
    batch = workload.global_batch_size
    for units in range(1, max_units + 1):
        total = gpu_count * units
        if total > max_gpus:
            out.append(Size(units, TOO_MANY_GPUS))
            break
        # The GPUs that train: all, or those dividing the global batch (the others idle).
        used = data_parallel_width(batch, total)
        if used is None:
            out.append(Size(units, cannot_keep(batch, total)))
            continue
        fitted_here = False
        for sharding in _local_shardings(workload, used, units, shardings):
            if fitted_here and workload.sharding == "auto":
                break  # ``auto`` takes the lightest scheme that fits: DDP, then ZeRO-2, then ZeRO-3
            key = (gpu, used, sharding)
            est = made(estimator, memo, workload, key)  # a build's sizes read the whole estimate
            if read is not None:
                read[key] = est
            if isinstance(est, str):
                out.append(Size(units, est))
                continue
            settled = settle(estimator, workload, est, gpus=total, used=used, sharding=sharding, margin=margin)
            if settled.est is None:
                out.append(Size(units, settled.reason or UNSUPPORTED))
                continue
            fitted_here = settled.est.fits
            out.append(Size(units, None, settled.est, job_host(settled.est), settled.warnings))
    return out


def _local_shardings(workload: Workload, total: int, units: int, shardings: ShardingChoices) -> list[str | None]:
    """Machines at home talk over Ethernet: more units may split the batch (DDP, ZeRO-1/2) but are
    not a way to shard one model that does not fit a single machine."""
    if total <= 1:
        return [None]
    return [s for s in shardings(workload.sharding, total) if units == 1 or s not in ("zero3", "fsdp")]


@dataclass(frozen=True, slots=True)
class _Move:
    """What a live size's hours and job RAM are recomputed from (its estimate's basis)."""

    index: int
    basis: AmountBasis
    terms: RunTerms
    ram_parts_gb: dict[str, float]
    disk_parts_gb: dict[str, float]


class KeptSizes:
    """A build's sizes made for the workload ``kept``, the estimates they read, and how the live
    ones move to another amount (prepared and checked the first time they move)."""

    __slots__ = ("_checked", "_moves", "kept", "read", "sizes")

    def __init__(self, made: list[Size], read: _Memo, kept: Workload) -> None:
        self.sizes = made
        self.read = tuple(read.items())
        self.kept = kept
        self._moves: list[_Move] | None = None  # None: they do not move
        self._checked = False

    def _prepare(self) -> list[_Move] | None:
        moves: list[_Move] = []
        for i, s in enumerate(self.sizes):
            est = s.est
            if est is None:
                continue  # rejected whatever the amount
            parts = moving_parts(est)
            if parts is None:
                continue  # not the estimator's model: nothing of it follows the amount
            basis, ram, disk = parts
            moves.append(_Move(i, basis, terms_of(basis), ram, disk))
        # The move must give every live size's own figures at the kept amount.
        for m, (hours, host) in zip(moves, self._figures(moves, self.kept), strict=True):
            s = self.sizes[m.index]
            if s.est is None or s.host is None or (hours, host.ram_gb) != (s.est.hours, s.host.ram_gb):
                return None
        return moves

    def _figures(self, moves: list[_Move], w: Workload) -> list[tuple[float, JobHost]]:
        out = []
        for m in moves:
            hours, ram, _disk = job_figures(m.terms, m.ram_parts_gb, m.disk_parts_gb, m.basis.gpu_count,
                                            amount_inputs(m.basis.shape, w))
            host = self.sizes[m.index].host
            assert host is not None
            out.append((hours, JobHost(ram, host.cpu_cores, host.setup_hours)))
        return out

    def at(self, w: Workload) -> list[Sized] | None:
        """Each size with its hours and job host for ``w``'s amount (``w``: the kept workload but for
        its amount); None when the sizes do not move (``_prepare``)."""
        out = _as_made(self.sizes)
        if w.amount() == self.kept.amount():
            return out
        if not self._checked:
            self._moves = self._prepare()  # the same whichever thread sets it
            self._checked = True
        moves = self._moves
        if moves is None:
            return None
        for m, (hours, host) in zip(moves, self._figures(moves, w), strict=True):
            out[m.index] = (self.sizes[m.index], hours, host)
        return out


# Bounded like the cloud configurations: an unrestricted quote reads one entry per (card, GPUs per
# machine) among the builds (7 in the bundled snapshot), so 256 hold the last 30 or so workloads, as
# ``cloud._CONFIGS`` does; each entry holds the few estimates its sizes run.
_SIZES: LruMemo[tuple[object, ...], KeptSizes] = LruMemo(256)
on_clear(_SIZES.clear)


def sizes_at(
    workload: Workload, gpu: str, gpu_count: int, *, max_gpus: int, max_units: int, margin: float | None,
    estimator: Estimator, shardings: ShardingChoices, memo: _Memo,
) -> list[Sized]:
    """``sizes`` with each size's hours and job host for ``workload``'s amount: from what an earlier
    request kept for the workload without its amount, moved, when the product's estimator makes
    them; the estimates they read go into ``memo`` either way."""
    # Partials, not nested functions: compiled (``optimizer.native``), a nested function that another
    # one calls is kept in the closure they share, which it refers to: a cycle, which held ``memo``
    # with every estimate of the request until a collection, put off for an hour in a served process
    # (``service.api.heap`` freezes the heap at each request end).
    make: Callable[..., list[Size]] = partial(
        sizes, workload, gpu, gpu_count, max_gpus=max_gpus, max_units=max_units, margin=margin,
        estimator=estimator, shardings=shardings, memo=memo,
    )
    if not kept_across_requests(estimator, shardings):
        return _as_made(make())
    key = (amount_key(workload), gpu, gpu_count, max_gpus, max_units, margin)
    kept = _SIZES.get_or_compute(key, partial(_keep, make, workload))
    moved = kept.at(workload)
    if moved is None:  # these sizes do not move between amounts
        return _as_made(make())
    take_read(memo, kept.read, workload)
    return moved


def _keep(make: Callable[..., list[Size]], workload: Workload) -> KeptSizes:
    """What ``_SIZES`` keeps: the sizes ``make`` makes, with the estimates they read."""
    read: _Memo = {}
    return KeptSizes(make(read=read), read, workload)
