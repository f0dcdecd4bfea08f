"""Every kept configuration of one workload moved to a new amount of training at once, as arrays.

``candidates.amounts.KeptMoves`` moves one (GPU, GPUs per node) group's configurations. An
unrestricted quote reads about 130 groups of the same workload, so moving them ran the same dozen
operations in Python for ~150 configurations a request, each with its own calls and dicts.
``MoveRows`` holds the movable configurations of all the groups of one workload (one entry per
``amount_key``) as columns and computes their moved figures with numpy once per amount: the
operations of ``KeptMoves._figures`` in the same order, so the same floats. A dict's values are
summed left to right as CPython 3.11's ``sum`` adds them (``numpy.add.accumulate``; from 3.12 ``sum``
compensates its rounding, and a group whose figures then differ refuses the rows), the roundings
are ``round``'s bit for bit (``rounded_all``), and the dataset's values come from
``host.with_dataset`` itself.

A group checks its rows against its own figures (``KeptMoves._figures``) the first time it uses
them; a group whose rows differ moves on its own from then on. Rows pay only where many groups move
together: the first ``BATCH_AFTER`` groups asked for an amount move on their own (a restricted
quote reads a handful), the others from the rows. A caller that moves more than ``BATCH_AFTER``
groups at once (``amounts.moved_groups``, for a kind of request asked before) moves them all
from the rows, computed once for the amount (``MoveRows.moved``).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from optimizer.candidates.estimator import host_share, loading_gb
from optimizer.estimator import calibration as cal
from optimizer.estimator.amounts import AmountBasis, amount_inputs
from optimizer.estimator.estimate import on_clear
from optimizer.estimator.host import with_dataset
from optimizer.estimator.memo import LruMemo
from optimizer.estimator.ranges import EXACT_BELOW
from optimizer.estimator.shapes import ModelShape
from optimizer.estimator.throughput import RunTerms
from optimizer.estimator.workload import Workload

# The first groups asked for an amount move on their own; after this many, the rows are computed.
BATCH_AFTER = 8
# Amounts whose counts and moved figures are kept at once (requests in flight ask for different ones).
RECENT_AMOUNTS = 4

Figures = tuple[float, float, float, float]  # ``amounts.MOVED_FIELDS``


class Row(Protocol):
    """What one configuration's moved figures follow from (``KeptMoves``' basis of it)."""

    @property
    def basis(self) -> AmountBasis: ...
    @property
    def terms(self) -> RunTerms: ...
    @property
    def ram_parts_gb(self) -> dict[str, float]: ...
    @property
    def disk_parts_gb(self) -> dict[str, float]: ...
    @property
    def gpu_count(self) -> int: ...  # the estimate's
    @property
    def total_gpus(self) -> float: ...  # the configuration's


class Member(Protocol):
    """A group's kept configurations (``KeptMoves``)."""

    def row_inputs(self) -> tuple[Sequence[Row], float, float | None] | None:
        """Its movable configurations' inputs, its GPUs per node and setup hours; None if it does not move."""


@dataclass(frozen=True, slots=True)
class _Columns:
    # id(member) -> its rows, and the member (weakly: the columns must not keep a group alive, and
    # an id may be reused once it is gone)
    spans: dict[int, tuple[int, int, weakref.ref[Any]]]
    shape: ModelShape
    tps: np.ndarray
    setup: np.ndarray
    download: np.ndarray
    checkpoint_bytes: np.ndarray
    ram: np.ndarray  # the RAM parts, in order, with the dataset's slot; zeros after the last
    ram_slot: tuple[np.ndarray, np.ndarray]
    loading: np.ndarray
    loading_real: np.ndarray
    disk: np.ndarray
    raw_slot: tuple[np.ndarray, np.ndarray]
    tokenized_slot: tuple[np.ndarray, np.ndarray]
    whole: np.ndarray
    gpus_per_node: np.ndarray
    share: np.ndarray
    given_setup: np.ndarray  # the request's setup hours where it set them
    setup_given: np.ndarray


def _columns(members: list[Member]) -> _Columns | None:
    rows: list[tuple[Row, float, float | None]] = []
    spans: dict[int, tuple[int, int, weakref.ref[Any]]] = {}
    for m in members:
        got = m.row_inputs()
        if not got or not got[0]:
            continue
        inputs, gpn, setup_hours = got
        spans[id(m)] = (len(rows), len(rows) + len(inputs), weakref.ref(m))
        rows.extend((r, gpn, setup_hours) for r in inputs)
    if not rows:
        return None
    n = len(rows)
    kr = max(len(r.ram_parts_gb) + 1 for r, _, _ in rows)
    kd = max(len(r.disk_parts_gb) + 2 for r, _, _ in rows)
    ram, disk = np.zeros((n, kr)), np.zeros((n, kd))
    ram_at, raw_at, tok_at = np.zeros(n, dtype=np.intp), np.zeros(n, dtype=np.intp), np.zeros(n, dtype=np.intp)
    loading, loading_real = np.zeros(n), np.zeros(n)
    whole, gpns, share = np.zeros(n, dtype=bool), np.zeros(n), np.zeros(n)
    given, setup_given = np.zeros(n), np.zeros(n, dtype=bool)
    for j, (r, gpn, setup_hours) in enumerate(rows):
        # The parts as ``with_dataset`` leaves them (its dataset values put in at each amount).
        moved_ram, moved_disk = with_dataset(r.ram_parts_gb, r.disk_parts_gb, 0.0, 0.0)
        ram[j, : len(moved_ram)] = list(moved_ram.values())
        disk[j, : len(moved_disk)] = list(moved_disk.values())
        ram_at[j] = list(moved_ram).index("dataset_cache")
        disk_keys = list(moved_disk)
        raw_at[j], tok_at[j] = disk_keys.index("dataset_raw"), disk_keys.index("dataset_tokenized")
        loading[j], loading_real[j] = loading_gb(moved_ram, r.gpu_count)  # as ``job_ram_gb`` reads them
        whole[j], share[j] = host_share(gpn, r.total_gpus)  # as ``amounts.config_figures`` takes them
        gpns[j] = gpn
        if setup_hours is not None:
            given[j], setup_given[j] = setup_hours, True
    terms = [r.terms for r, _, _ in rows]
    at = np.arange(n)
    return _Columns(
        spans, rows[0][0].basis.shape,
        np.array([t.tokens_per_second for t in terms]), np.array([t.setup_hours for t in terms]),
        np.array([t.download_hours for t in terms]), np.array([t.checkpoint_bytes for t in terms]),
        ram, (at, ram_at), loading, loading_real, disk, (at, raw_at), (at, tok_at),
        whole, gpns, share, given, setup_given,
    )


def rounded_all(xs: np.ndarray, nd: int) -> list[float]:
    """``[round(x, nd) for x in xs]``, bit for bit, for ``nd`` 1 to 4: ``ranges.rounded``'s argument
    over a column (rounding ``x * 10**nd`` to a double never crosses a half below 2**52, so only a
    product equal to a half leaves the side unknown). Halves, huge values and non-numbers are left
    to ``round`` itself, and so are zeros, whose sign ``round`` keeps. For 148 rows, timed in a loop:
    9 us here, 32 us through ``round`` (``tests/unit/test_rounding.py`` holds the two
    to the same bits)."""
    p = 10.0**nd
    with np.errstate(over="ignore", invalid="ignore"):  # infinities and NaNs go to ``round`` below
        y = xs * p
        fl = np.floor(y)
        frac = y - fl
        out = np.where(frac > 0.5, fl + 1.0, fl) / p
        plain = (np.abs(y) < EXACT_BELOW) & (frac != 0.5) & (out != 0.0)  # False for NaN
    got = out.tolist()
    if not plain.all():
        for i in np.flatnonzero(~plain).tolist():
            got[i] = round(float(xs[i]), nd)
    return got


def _moved(c: _Columns, w: Workload) -> tuple[list[float], list[float], list[float], list[float]]:
    """Every row's ``MOVED_FIELDS`` for ``w``'s amount, by column."""
    a = amount_inputs(c.shape, w)
    # ``throughput.run_hours``, then ``amounts.shown_hours``.
    train_h = a.tokens / c.tps / 3600.0
    ckpt_h = np.maximum(1.0, train_h) * c.checkpoint_bytes / (cal.CHECKPOINT_WRITE_GBS.value * 1e9) / 3600.0
    hours = np.array(rounded_all(train_h + (c.setup + c.download + ckpt_h), 4))
    # ``host.with_dataset`` and the sums ``estimator.job_ram_gb`` and ``host.disk_total_gb`` take.
    probe_ram, probe_disk = with_dataset({}, {}, a.cache_gb, a.raw_gb)
    ram = c.ram.copy()
    ram[c.ram_slot] = probe_ram["dataset_cache"]
    job_ram = np.add.accumulate(ram, axis=1)[:, -1] - c.loading + c.loading_real
    disk = c.disk.copy()
    disk[c.raw_slot] = probe_disk["dataset_raw"]
    disk[c.tokenized_slot] = probe_disk["dataset_tokenized"]
    disk_gb = rounded_all(np.add.accumulate(disk, axis=1)[:, -1], 1)
    # ``amounts.config_figures``.
    train = np.maximum(0.0, hours - c.setup)
    train_hours = np.where(c.whole, train, train / c.gpus_per_node)
    setup = np.where(c.setup_given, c.given_setup, c.setup)
    return train_hours.tolist(), (job_ram * c.share).tolist(), setup.tolist(), disk_gb


# The columns and every row's moved figures, for one amount.
Moved = tuple[_Columns, list[Figures]]


def rows_of(columns: _Columns, member: Member) -> tuple[int, int] | None:
    """``member``'s first row and the row past its last in ``columns``; None when it has none there
    (it joined after they were built, or another group has since taken its id)."""
    span = columns.spans.get(id(member))
    if span is None or span[2]() is not member:
        return None
    return span[0], span[1]


def span_of(done: Moved, member: Member) -> list[Figures] | None:
    """``member``'s rows of ``done``; None when it has none there (``rows_of``)."""
    columns, moved = done
    at = rows_of(columns, member)
    return None if at is None else moved[at[0]:at[1]]


class MoveRows:
    """The movable configurations of one workload's kept groups (``join``), moved together."""

    __slots__ = ("__weakref__", "_columns", "_kept_at", "_lock", "_members", "_recent")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: list[weakref.ref[Any]] = []
        self._kept_at = 0  # members after the last time the ones let go were left out
        self._columns: _Columns | None = None
        # The amounts asked lately (a few: requests in flight at once ask for different ones): how
        # many groups asked for each, and once computed, the columns and their moved figures.
        self._recent: dict[tuple[float | None, ...], list[Any]] = {}

    def join(self, member: Member) -> None:
        with self._lock:
            if len(self._members) >= 2 * self._kept_at + 64:
                # Groups come and go with the kept configurations' bound even when no amount
                # moves them (no rows built): the list stays within twice the groups alive.
                self._prune()
            self._members.append(weakref.ref(member))
            self._columns = None
            self._recent = {}

    def _prune(self) -> None:
        self._members = [r for r in self._members if r() is not None]
        self._kept_at = len(self._members)

    def figures(self, member: Member, w: Workload) -> list[Figures] | None:
        """``member``'s figures for ``w``'s amount from the rows; None while it is to move on its
        own (``BATCH_AFTER`` groups or fewer have asked for this amount, or it has no rows)."""
        entry = self._entry(w)
        # Not under the lock: two threads counting at once may miss one, which only delays the rows.
        entry[0] += 1
        if entry[1] is None and entry[0] <= BATCH_AFTER:
            return None
        done = self.moved(w, entry)
        return None if done is None else span_of(done, member)

    def moved(self, w: Workload, entry: list[Any] | None = None) -> Moved | None:
        """Every row's figures for ``w``'s amount, computed once per amount (however many groups
        asked); None without rows. For a caller moving many groups at once (``amounts.moved_groups``)."""
        if entry is None:
            entry = self._entry(w)
        done: Moved | None = entry[1]
        if done is None:
            columns = self._built()
            if columns is None:
                return None
            # Row by row, once: each group then takes its span as one slice (~100 groups a quote).
            # Two threads may both compute it: the same figures.
            done = entry[1] = (columns, list(zip(*_moved(columns, w), strict=True)))
        return done

    def _entry(self, w: Workload) -> list[Any]:
        """``w``'s amount's [groups that asked, moved rows or None]."""
        amount = w.amount()
        entry = self._recent.get(amount)
        if entry is None:
            with self._lock:
                entry = self._recent.get(amount)
                if entry is None:
                    if len(self._recent) >= RECENT_AMOUNTS:
                        del self._recent[next(iter(self._recent))]
                    entry = self._recent[amount] = [0, None]
        return entry

    def members(self) -> list[Member]:
        """The groups these rows move that are still kept."""
        return [m for m in (r() for r in self._members) if m is not None]

    def _built(self) -> _Columns | None:
        with self._lock:
            if self._columns is None:
                self._prune()  # groups whose kept configurations were let go are left out
                self._columns = _columns(self.members())
            return self._columns


# One ``MoveRows`` per workload without its amount (``amounts.amount_key``), for its kept groups:
# the kept configurations (``cloud._CONFIGS``, 4,096 groups) hold some 30 workloads, so 256 cover
# them; a group whose ``MoveRows`` was let go keeps its own (and its columns, ~20 KB).
_ROWS: LruMemo[tuple[str, tuple[str, ...]], MoveRows] = LruMemo(256)


on_clear(_ROWS.clear)


def rows_for(key: tuple[str, tuple[str, ...]]) -> MoveRows:
    """The rows of the workload ``key`` names (``amounts.amount_key``)."""
    return _ROWS.get_or_compute(key, MoveRows)
