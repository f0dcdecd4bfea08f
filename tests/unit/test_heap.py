"""``service.api.heap``: a slow full collection leads to ``gc.freeze`` between requests; frozen
objects go back to the collector once per ``THAW_EVERY_S``."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from service.api import heap


@pytest.fixture
def keeper(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(heap, "_installed", False)
    monkeypatch.setattr(heap, "_due", False)
    threshold = gc.get_threshold()
    while heap._observe in gc.callbacks:  # whatever this process installed before
        gc.callbacks.remove(heap._observe)
    yield
    gc.set_threshold(*threshold)
    while heap._observe in gc.callbacks:
        gc.callbacks.remove(heap._observe)
    gc.unfreeze()


def test_nothing_is_frozen_before_a_slow_full_collection(keeper: None) -> None:
    heap.keep_long_lived()
    gc.collect(0)  # a young collection is no sign of a large heap
    assert heap.settle_if_due() is False
    assert heap.frozen_objects() == 0


def test_a_slow_full_collection_freezes_what_survived_it(keeper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    heap.keep_long_lived()
    heap.keep_long_lived()  # once per process
    assert gc.callbacks.count(heap._observe) == 1
    monkeypatch.setattr(heap, "SLOW_FULL_COLLECTION_S", 0.0)  # every full collection counts as slow
    kept = [[i] for i in range(10_000)]  # a long-lived structure
    gc.collect()
    assert heap.settle_if_due() is True
    assert heap.frozen_objects() >= len(kept)
    assert heap.settle_if_due() is False  # done until the next slow one


def test_frozen_objects_go_back_to_the_collector_each_thaw_period(keeper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    heap.keep_long_lived()
    monkeypatch.setattr(heap, "SLOW_FULL_COLLECTION_S", 0.0)
    gc.collect()
    assert heap.settle_if_due() is True
    cycle: list[object] = []
    cycle.append(cycle)  # garbage in a cycle, frozen below: only a thaw lets it be collected
    gc.freeze()
    del cycle
    monkeypatch.setattr(heap, "THAW_EVERY_S", 0.0)
    seen: list[int] = []
    gc.callbacks.append(lambda phase, info: seen.append(info["collected"]) if phase == "stop" else None)
    try:
        assert heap.settle_if_due() is True
    finally:
        gc.callbacks.pop()
    assert sum(seen) >= 1  # the thaw's full collection freed the cycle


def test_without_the_keeper_nothing_is_ever_due(keeper: None) -> None:
    gc.collect()
    assert heap.settle_if_due() is False


def test_a_served_process_collects_its_young_objects_less_often(keeper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    heap.keep_long_lived()
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 10, 10)
    # A higher threshold the process already had is kept.
    monkeypatch.setattr(heap, "_installed", False)
    gc.set_threshold(50_000, 10, 10)
    heap.keep_long_lived()
    assert gc.get_threshold() == (50_000, 10, 10)
