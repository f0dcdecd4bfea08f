"""``service.api.heap``: a served process freezes what outlived each request; a failed request's
cycles are collected first; frozen cycles are collected at a thaw (hourly, or after failed
requests were frozen in flight)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from service.api import heap


class _Node:
    """A weak-referenceable object to put in a cycle."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def keeper(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(heap, "_installed", False)
    monkeypatch.setattr(heap, "_exposed", 0)
    threshold = gc.get_threshold()
    gc.unfreeze()  # whatever ran before in this process (a CLI main, another test) starts none frozen
    gc.collect()
    yield
    gc.set_threshold(*threshold)
    gc.unfreeze()


def _dropped_cycle() -> weakref.ref[_Node]:
    """A reference cycle nothing else holds: only the cycle collector can free it."""
    return weakref.ref(_Node())


def test_without_the_keeper_a_request_end_freezes_nothing(keeper: None) -> None:
    mark = heap.request_started()
    kept = [[i] for i in range(1_000)]
    assert heap.request_ended(mark, 200) is False
    assert heap.frozen_objects() == 0
    assert kept


def test_a_served_process_freezes_what_outlived_each_request(keeper: None) -> None:
    heap.keep_long_lived()
    heap.keep_long_lived()  # once per process
    mark = heap.request_started()
    kept = [[i] for i in range(10_000)]  # what a request leaves in a memo
    assert heap.request_ended(mark, 200) is True
    first = heap.frozen_objects()
    assert first >= len(kept)
    assert len(gc.get_objects(generation=0)) < 100  # a young collection now walks only what comes next
    more = [[i] for i in range(5_000)]
    assert heap.request_ended(heap.request_started(), 200) is True
    assert heap.frozen_objects() >= first + len(more)


def test_a_failed_request_has_its_cycles_collected_before_the_freeze(keeper: None) -> None:
    heap.keep_long_lived()
    heap.request_ended(heap.request_started(), 200)
    mark = heap.request_started()
    gone = _dropped_cycle()  # what FastAPI's error path leaves (an exception and its frames)
    heap.request_ended(mark, 422)
    assert gone() is None
    # The guard's own refusals leave no cycles and run no collection: a burst sends thousands.
    refused = _dropped_cycle()
    heap.request_ended(heap.request_started(), 429)
    assert refused() is not None
    # After a request that succeeded, the same cycle would be frozen until the next thaw.
    kept = _dropped_cycle()
    heap.request_ended(heap.request_started(), 200)
    assert kept() is not None


def test_failed_requests_frozen_in_flight_lead_to_a_thaw(keeper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    heap.keep_long_lived()
    monkeypatch.setattr(heap, "THAW_AFTER_EXPOSED", 2)
    frozen_cycles = []
    for _ in range(2):
        failing = heap.request_started()
        node = _Node()  # the failing request's objects, alive while it runs
        heap.request_ended(heap.request_started(), 200)  # another request ends: frozen in flight
        frozen_cycles.append(weakref.ref(node))
        del node  # now garbage, but frozen
        assert frozen_cycles[-1]() is not None
        heap.request_ended(failing, 422)
    # The second exposed failure reached the bound: that end thawed and collected everything.
    assert all(ref() is None for ref in frozen_cycles)
    assert heap._exposed == 0
    # A failed request no freeze caught in flight is not counted.
    heap.request_ended(heap.request_started(), 422)
    assert heap._exposed == 0


def test_frozen_cycles_go_back_to_the_collector_each_thaw_period(keeper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    heap.keep_long_lived()
    kept = _dropped_cycle()
    heap.request_ended(heap.request_started(), 200)
    assert kept() is not None  # frozen
    monkeypatch.setattr(heap, "THAW_EVERY_S", 0.0)
    assert heap.request_ended(heap.request_started(), 200) is True
    assert kept() is None  # the thaw's full collection freed it
    assert heap.frozen_objects() > 0  # and froze the rest again


def test_a_served_process_collects_its_young_objects_less_often(keeper: None, monkeypatch: pytest.MonkeyPatch) -> None:
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    heap.keep_long_lived()
    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, 10, 10)
    # A higher threshold the process already had is kept.
    monkeypatch.setattr(heap, "_installed", False)
    gc.set_threshold(50_000, 10, 10)
    heap.keep_long_lived()
    assert gc.get_threshold() == (50_000, 10, 10)
