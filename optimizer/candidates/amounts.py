"""A group's kept configurations for another amount of training (tokens, samples, epochs).

``candidates.cloud`` keeps each (GPU, GPUs per node) group's configurations across requests. What
a configuration is (nodes, sharding, recipe, memory, whether it fits, why not) does not depend on
how much is trained; its training hours and its dataset's share of host RAM and disk do. So the
configurations are kept per workload without its amount (``Workload.rate_key``) and moved to the
amount a request asks for here.

Moving one costs a few float operations, not a new estimate: the request's amount is read once
(``amounts.amount_inputs``: the run's tokens, the dataset's sizes), and each kept configuration's
hours, RAM and disk are recomputed from the basis its estimate was made from with the estimator's
own functions (``amounts.hours_at``, ``host.with_dataset``, ``estimator.job_ram_gb``). No workload,
estimate or host object is made; a moved configuration keeps the estimate it was made from (only
moving reads it). ``KeptMoves`` checks, the first time an entry moves, that this reproduces every
figure ``cloud._configs`` gave at the kept amount; where it does not (a change to one of the two
that the other lacks) the entry is computed anew for each amount rather than moved. A quote for
tokens T is the same, figure for figure, whether computed cold or right after one for other tokens
(``tests/unit/test_amounts.py``, ``tests/unit/test_moved_configs.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from optimizer.candidates.amount_rows import BATCH_AFTER, Moved, MoveRows, rows_for, rows_of, span_of
from optimizer.candidates.estimator import Read, host_share, job_ram_gb
from optimizer.estimator.amounts import (
    AmountBasis,
    AmountInputs,
    amount_inputs,
    amount_kind,
    moving_parts,
    same_amount,
    shown_hours,
    terms_of,
)
from optimizer.estimator.estimate import Unfit, moved_to_amount
from optimizer.estimator.host import disk_total_gb, with_dataset
from optimizer.estimator.throughput import RunTerms, run_hours
from optimizer.estimator.workload import Workload

if TYPE_CHECKING:
    from collections.abc import Iterable

    from optimizer.candidates.amount_rows import _Columns
    from optimizer.results import Estimate


class Movable(Protocol):
    """A kept configuration (``cloud._Config``)."""

    def moved(self, train_hours: float, ram_gb_per_node: float, setup_hours: float,
              disk_gb_per_node: float) -> Any:
        """A copy with ``MOVED_FIELDS`` as given."""


C = TypeVar("C", bound=Movable)

# The configuration fields that follow the amount (``cloud._Config``); the others never change.
MOVED_FIELDS = ("train_hours", "ram_gb_per_node", "setup_hours", "disk_gb_per_node")


def amount_key(w: Workload) -> tuple[str, tuple[str, ...]]:
    """What kept configurations are keyed on in place of ``w.cache_key()``: the workload without its
    amount, and which amount fields it gives (an image model's tokens are refused, its samples not)."""
    return w.rate_key(), amount_kind(w)


@dataclass(frozen=True, slots=True)
class _Basis:
    """What one configuration's amount figures are recomputed from."""

    index: int  # in the kept list
    basis: AmountBasis
    terms: RunTerms  # what the run's hours follow from besides the tokens
    ram_parts_gb: dict[str, float]
    disk_parts_gb: dict[str, float]
    gpu_count: int  # the estimate's (the GPUs that train)
    total_gpus: float  # the configuration's (all GPUs of its nodes)


def config_figures(
    hours: float, job_setup_hours: float, job_ram: float, disk_gb: float,
    gpus_per_node: float, total_gpus: float, setup_hours: float | None,
) -> tuple[float, float, float, float]:
    """A configuration's ``MOVED_FIELDS`` from its estimate's hours, setup hours, job RAM and disk:
    the arithmetic ``cloud._configs`` uses (``KeptMoves`` holds the two to the same figures)."""
    whole, share = host_share(gpus_per_node, total_gpus)
    # The estimate's hours include its setup; option generation bills setup once, apart.
    train = max(0.0, hours - job_setup_hours)
    # A GPU partition (g6f: a quarter GPU) runs at its share of the card's speed.
    train_hours = train if whole else train / gpus_per_node
    setup = job_setup_hours if setup_hours is None else setup_hours
    return train_hours, job_ram * share, setup, disk_gb


class KeptMoves(Generic[C]):
    """A group's kept configurations (made by ``cloud._configs`` for ``kept``) and how each moves to
    another amount of training. What moving needs is read from the configurations' estimates, and
    checked, the first time they move: a quote that is never followed by another amount pays nothing."""

    __slots__ = ("__weakref__", "_bases", "_cfgs", "_checked", "_gpus_per_node", "_kept", "_rows",
                 "_setup_hours", "_trusted")

    def __init__(self, cfgs: list[C], kept: Workload, gpus_per_node: float, setup_hours: float | None) -> None:
        self._cfgs = cfgs
        self._kept = kept
        self._gpus_per_node = gpus_per_node
        self._setup_hours = setup_hours
        self._bases: list[_Basis] | None = None  # None: not movable (or not yet checked)
        self._checked = False
        # The workload's other groups move with this one (``amount_rows``), once their rows are
        # found to give this group's own figures (None: not yet compared).
        self._rows = rows_for(amount_key(kept))
        self._rows.join(self)
        self._trusted: bool | None = None

    @property
    def rows(self) -> MoveRows:
        """The rows this group moves with (its workload's, as of when it was kept)."""
        return self._rows

    def row_plan(self, columns: _Columns) -> tuple[list[int], int] | None:
        """Where this group's moved figures lie in ``columns`` (its rows' ``_Columns``): the indices
        of its moving configurations and its first row, for a caller that moves many groups in one
        pass (``cloud._MovePlan``); None unless it moves from those rows as ``at`` would, without
        further checks: checked, movable, and (with anything to move) its rows found its own."""
        if not self._checked or self._bases is None:
            return None
        if not self._bases:
            return [], 0
        at = rows_of(columns, self) if self._trusted is True else None
        return None if at is None else ([b.index for b in self._bases], at[0])

    def row_inputs(self) -> tuple[list[_Basis], float, float | None] | None:
        """What ``amount_rows`` moves this group's configurations from (``amount_rows.Member``)."""
        if not self._checked:
            self._bases = self._prepare()  # the same whichever thread sets it
            self._checked = True
        if not self._bases or self._trusted is False:
            return None
        return self._bases, self._gpus_per_node, self._setup_hours

    def _prepare(self) -> list[_Basis] | None:
        """Each movable configuration's basis; None when moving them would not reproduce their own
        figures at the kept amount exactly (then they are computed anew for each amount)."""
        cfgs = self._cfgs
        bases: list[_Basis] = []
        for i, c in enumerate(cfgs):
            est: Estimate | None = getattr(c, "source", None)
            if est is None or getattr(c, "reason", None) is not None:
                continue  # a rejection keeps its reason for any amount
            parts = moving_parts(est)
            if parts is None:
                continue  # not the estimator's model: nothing of it follows the amount
            basis, ram, disk = parts
            bases.append(_Basis(i, basis, terms_of(basis), ram, disk, est.gpu_count,
                                c.total_gpus))  # type: ignore[attr-defined]
        for b, got in zip(bases, self._figures(bases, self._kept), strict=True):
            if got != tuple(getattr(cfgs[b.index], f) for f in MOVED_FIELDS):
                return None
        return bases

    def _figures(self, bases: list[_Basis], w: Workload) -> list[tuple[float, float, float, float]]:
        out = []
        gpn, setup_hours = self._gpus_per_node, self._setup_hours
        for b in bases:
            hours, ram, disk = job_figures(b.terms, b.ram_parts_gb, b.disk_parts_gb, b.gpu_count,
                                           amount_inputs(b.basis.shape, w))
            # ``estimator.job_host`` reads the setup as the hours' ``setup_hours`` part.
            out.append(config_figures(hours, b.terms.setup_hours, ram, disk, gpn, b.total_gpus, setup_hours))
        return out

    def at(self, w: Workload, done: Moved | None = None) -> list[C] | None:
        """The configurations for ``w``'s amount of training (``w``: the kept workload but for its
        amount); None when they do not move (``_prepare``). ``done``: this group's rows' moved
        figures for that amount, when the caller moved them (``moved_groups``)."""
        if not self._checked:
            self._bases = self._prepare()  # the same whichever thread sets it
            self._checked = True
        if self._bases is None:
            return None
        cfgs = list(self._cfgs)
        if not self._bases:
            return cfgs
        got = None
        if self._trusted is not False:
            got = self._rows.figures(self, w) if done is None else span_of(done, self)
        if got is None:
            got = self._figures(self._bases, w)
        elif not self._trusted:  # the first time: the rows' figures must be this group's own
            own = self._figures(self._bases, w)
            self._trusted, got = got == own, own
        for b, (f0, f1, f2, f3) in zip(self._bases, got, strict=True):
            cfgs[b.index] = cfgs[b.index].moved(f0, f1, f2, f3)
        return cfgs


def moved_groups(moves: Sequence[KeptMoves[C]], w: Workload) -> list[list[C] | None]:
    """``[m.at(w) for m in moves]``: the same configurations. Past ``BATCH_AFTER`` groups, each
    group's rows (one ``MoveRows`` per workload) are moved once for all of them first, so no group
    counts itself in or moves on its own (an unrestricted quote moves about 130)."""
    if len(moves) <= BATCH_AFTER:
        return [m.at(w) for m in moves]
    done: dict[int, Moved | None] = {}
    out: list[list[C] | None] = []
    for m in moves:
        rows = m.rows
        key = id(rows)
        if key not in done:
            done[key] = rows.moved(w)
        out.append(m.at(w, done[key]))  # None: no rows, so it moves on its own
    return out


def job_figures(
    terms: RunTerms, ram_parts_gb: dict[str, float], disk_parts_gb: dict[str, float], gpu_count: int,
    a: AmountInputs,
) -> tuple[float, float, float]:
    """A kept estimate's figures for the amount ``a``, without making the estimate: its hours (as
    ``amounts.hours_at`` computes them), the RAM the job uses on one node (``estimator.job_host``,
    from the parts ``host.with_dataset`` gives) and its disk (``HostNeeds.disk_gb``). ``terms``,
    the parts and ``gpu_count`` are the estimate's own (``amounts.terms_of``, its details)."""
    ram_parts, disk_parts = with_dataset(ram_parts_gb, disk_parts_gb, a.cache_gb, a.raw_gb)
    return shown_hours(run_hours(a.tokens, terms)[0]), job_ram_gb(ram_parts, gpu_count), disk_total_gb(disk_parts)


def take_read(memo: dict[Any, Read], read: Iterable[tuple[Any, Read]], w: Workload) -> None:
    """Put the estimates a kept entry read (at its own amount) into a request's ``memo`` for ``w``,
    where it lacks them, so what the request reports it estimated is what computing it cold reads.
    A ``MovingMemo`` for ``w`` takes them as they are and moves one when it is read."""
    lazy = isinstance(memo, MovingMemo) and memo.workload is w
    for k, est in read:
        if k not in memo:
            memo[k] = est if lazy else moved_estimate(est, w)


def moved_estimate(est: Read, w: Workload) -> Read:
    """A kept estimate (or rejection reason, or ``Unfit``: the same for every amount) for ``w``'s amount."""
    if isinstance(est, str | Unfit) or same_amount(est, w):
        return est
    return moved_to_amount(est, w)


class MovingMemo(dict):  # type: ignore[type-arg]
    """A request's memo of estimates (``(gpu, count, sharding) -> Estimate | reason``) that may hold
    kept estimates of another amount of training: each is moved to ``workload``'s amount when read
    (most are only counted, in ``estimator_calls``), and the moved one replaces it."""

    def __init__(self, workload: Workload) -> None:
        super().__init__()
        self.workload = workload

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)
        moved = moved_estimate(value, self.workload)
        if moved is not value:
            super().__setitem__(key, moved)
        return moved

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def values(self) -> Any:  # every read moves
        return [self[k] for k in self]

    def items(self) -> Any:
        return [(k, self[k]) for k in self]
