"""The rows that move all the kept groups of one workload to a new amount at once
(``candidates.amount_rows``): a group takes its figures from them only once they have given its own,
a request that moves a handful of groups moves them on their own, and the rows keep no group alive."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from optimizer.candidates import amount_rows, cloud
from optimizer.candidates.amount_rows import BATCH_AFTER, rows_for
from optimizer.candidates.amounts import amount_key
from optimizer.estimator.estimate import clear_cache
from optimizer.estimator.workload import Workload
from tests.unit.test_moved_configs import _groups, _key, _make, _read, _scaled

W = Workload(model="qwen2.5-0.5b", method="lora", tokens=2e7)


def _moved(w: Workload, groups: list[Any]) -> list[list[Any]]:
    return [cloud._kept(_key(w, g, None), _make(w, g, None), {}, w, g.gpus_per_node, None) for g in groups]


def _movers(w: Workload, groups: list[Any]) -> list[Any]:
    return [cloud._CONFIGS.get_or_compute(_key(w, g, None), _unreachable)[3] for g in groups]


def _unreachable() -> Any:
    raise AssertionError("the entry is kept")


def test_rows_that_are_not_a_groups_own_figures_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()
    groups = _groups()
    _moved(W, groups)
    real = amount_rows._moved

    def off(c: Any, w: Workload) -> Any:  # as if the rows' arithmetic drifted from a group's own
        hours, ram, setup, disk = real(c, w)
        return [h * 1.001 for h in hours], ram, setup, disk

    monkeypatch.setattr(amount_rows, "_moved", off)
    other = _scaled(W, 3.0)
    got = _moved(other, groups)
    movable = [m for m in _movers(W, groups) if m._bases]
    assert len(movable) > BATCH_AFTER
    # Each group past the first few was offered rows, found them wrong, and moved on its own.
    assert sum(m._trusted is False for m in movable) == len(movable) - BATCH_AFTER
    clear_cache()
    cold = [_make(other, g, None)({}) for g in groups]
    assert [[_read(c) for c in cfgs] for cfgs in got] == [[_read(c) for c in cfgs] for cfgs in cold]


def test_a_handful_of_groups_move_on_their_own() -> None:
    clear_cache()
    groups = _groups()[:BATCH_AFTER]
    _moved(W, groups)
    for factor in (0.5, 2.0, 9.0):
        _moved(_scaled(W, factor), groups)
    assert rows_for(amount_key(W))._columns is None  # never built
    assert all(m._trusted is None for m in _movers(W, groups))


def test_the_rows_keep_no_group_alive() -> None:
    clear_cache()
    groups = _groups()
    _moved(W, groups)
    _moved(_scaled(W, 2.0), groups)
    rows = rows_for(amount_key(W))
    assert rows._columns is not None and len(rows.members()) == len(groups)
    first = weakref.ref(_movers(W, groups)[0])
    clear_cache()  # lets the kept groups go
    gc.collect()
    assert first() is None
    assert rows.members() == []


def test_groups_that_come_and_go_unmoved_do_not_pile_up() -> None:
    class Gone:  # a group let go before any amount moved it
        def row_inputs(self) -> None:
            return None

    rows = amount_rows.MoveRows()
    for _ in range(1_000):
        rows.join(Gone())  # dropped at once
    assert len(rows._members) <= 64 + 1
    assert rows.members() == []
