"""Which process hands a kept-alive connection on (``service.api.balance``): the averages each
publishes, the threshold, the hold after a close, slots of processes that are gone."""

from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.api import balance
from service.api.balance import CHECK_S, HOLD_S, IMBALANCE, SLOTS, TAU_S, ProcessLoads, shared_file


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


_made: list[ProcessLoads] = []


def _loads(path: Path, clock: Clock) -> ProcessLoads:
    made = ProcessLoads(path, clock=clock)
    _made.append(made)
    return made


def _pair(path: Path, clock: Clock) -> tuple[ProcessLoads, ProcessLoads]:
    # Two processes' views of one file; both carry this test's pid, which is alive.
    return _loads(path, clock), _loads(path, clock)


def _hold(loads: ProcessLoads, in_flight: int) -> None:
    while loads.in_flight < in_flight:
        loads.started()
    while loads.in_flight > in_flight:
        loads.ended()


@pytest.fixture()
def loads_file(tmp_path: Path) -> Iterator[Path]:
    with shared_file(2, folder=tmp_path) as path:
        assert path is not None
        yield path
    while _made:
        _made.pop().close()


def test_one_process_gets_no_file_and_two_share_one_that_goes_with_them(tmp_path: Path) -> None:
    with shared_file(1, folder=tmp_path) as none:
        assert none is None and balance.ENV not in os.environ
    assert list(tmp_path.iterdir()) == []
    with shared_file(2, folder=tmp_path) as path:
        assert path is not None and path.parent == tmp_path
        assert os.environ[balance.ENV] == str(path)
        assert path.stat().st_size == balance._SLOT.size * SLOTS
    assert balance.ENV not in os.environ and list(tmp_path.iterdir()) == []


def test_windows_serves_unbalanced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No flock there: no file, and no process looks for one.
    monkeypatch.setattr(balance.sys, "platform", "win32")
    with shared_file(2, folder=tmp_path) as none:
        assert none is None and balance.ENV not in os.environ
    assert list(tmp_path.iterdir()) == []


def test_the_average_in_flight_follows_the_count_over_tau(loads_file: Path) -> None:
    clock = Clock()
    a = _loads(loads_file, clock)
    _hold(a, 2)
    clock.now += 10 * TAU_S
    assert a.load() == pytest.approx(2.0, abs=1e-3)
    _hold(a, 0)
    clock.now += TAU_S
    assert a.load() == pytest.approx(2.0 / math.e, rel=1e-3)
    clock.now += 10 * TAU_S
    assert a.load() == pytest.approx(0.0, abs=1e-3)


def test_the_busier_process_closes_once_then_holds(loads_file: Path) -> None:
    clock = Clock()
    a, b = _pair(loads_file, clock)
    assert a.slot != b.slot
    _hold(a, 3)
    _hold(b, 1)
    clock.now += 10 * TAU_S
    # b reads a's slot as of now, though a changed nothing since (decayed to the moment).
    assert b.least_other(clock.now) == pytest.approx(3.0, abs=1e-2)
    assert not b.should_close()
    assert a.should_close()
    assert not a.should_close()  # the averages have not followed yet
    clock.now += HOLD_S * 0.9
    assert not a.should_close()
    clock.now += HOLD_S * 0.2
    assert a.should_close()  # still three against one


@pytest.mark.parametrize(("mine", "other"), [(2, 2), (3, 2), (1, 0), (2, 1)])
def test_a_difference_of_one_request_or_less_moves_nothing(loads_file: Path, mine: int, other: int) -> None:
    # Moving one closed-loop client changes the difference by two: at one it would only swing back.
    assert mine - other <= IMBALANCE
    clock = Clock()
    a, b = _pair(loads_file, clock)
    _hold(a, mine)
    _hold(b, other)
    clock.now += 10 * TAU_S
    assert not a.should_close() and not b.should_close()


def test_a_busy_process_looks_at_the_others_at_most_every_check_interval(loads_file: Path) -> None:
    clock = Clock()
    a, b = _pair(loads_file, clock)
    _hold(a, 3)
    _hold(b, 3)
    clock.now += 10 * TAU_S
    assert not a.should_close()  # three against three: looked, nothing to move
    _hold(b, 0)
    b.mean = 0.0  # as if idle for long: its slot now reads 0
    b._publish()
    clock.now += CHECK_S / 2
    assert not a.should_close()  # not looked again yet
    clock.now += CHECK_S
    assert a.should_close()


def test_a_process_alone_never_closes(loads_file: Path) -> None:
    clock = Clock()
    a = _loads(loads_file, clock)
    _hold(a, 8)
    clock.now += 10 * TAU_S
    assert not a.should_close()


def _exit_at_once() -> None:
    pass


def test_a_dead_process_slot_is_ignored_and_taken_again(loads_file: Path) -> None:
    child = multiprocessing.get_context("spawn").Process(target=_exit_at_once)
    child.start()
    child.join(30)
    assert child.pid is not None and child.exitcode == 0
    clock = Clock()
    a = _loads(loads_file, clock)
    # A process that was killed: its slot still says it was idle.
    with loads_file.open("r+b") as f:
        f.seek(balance._SLOT.size)
        f.write(balance._SLOT.pack(child.pid, 0.0, clock.now, 0.0))
    _hold(a, 4)
    clock.now += 10 * TAU_S
    assert a.least_other(clock.now) is None
    assert not a.should_close()
    # The next process to start takes the dead one's slot.
    assert a.slot == 0 and _loads(loads_file, clock).slot == 1


def test_a_live_process_that_is_no_sibling_holds_no_slot(loads_file: Path) -> None:
    # A dead process's pid taken by an unrelated one: here, this test's parent, alive but not a
    # process of the same parent.
    clock = Clock()
    a = _loads(loads_file, clock)
    with loads_file.open("r+b") as f:
        f.seek(balance._SLOT.size)
        f.write(balance._SLOT.pack(os.getppid(), 0.0, clock.now, 0.0))
    _hold(a, 4)
    clock.now += 10 * TAU_S
    assert a.least_other(clock.now) is None and not a.should_close()
    assert _loads(loads_file, clock).slot == 1


def test_a_slot_given_back_is_free_and_read_as_empty(loads_file: Path) -> None:
    clock = Clock()
    a, b = _pair(loads_file, clock)
    _hold(a, 3)
    clock.now += 10 * TAU_S
    b.close()
    b.close()  # twice is harmless
    assert a.least_other(clock.now) is None
    assert _loads(loads_file, clock).slot == b.slot


def test_from_the_environment_only_with_a_readable_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(balance.ENV, raising=False)
    assert ProcessLoads.from_environment() is None
    monkeypatch.setenv(balance.ENV, str(tmp_path / "gone"))
    assert ProcessLoads.from_environment() is None  # serves on, unbalanced
    (tmp_path / "short").write_bytes(b"\0" * 10)
    monkeypatch.setenv(balance.ENV, str(tmp_path / "short"))
    assert ProcessLoads.from_environment() is None
    with shared_file(2, folder=tmp_path / "f"):
        joined = ProcessLoads.from_environment()
        assert joined is not None and joined.pid == os.getpid()
        joined.close()


def test_every_slot_held_is_an_error_not_a_shared_slot(loads_file: Path) -> None:
    clock = Clock()
    held = [_loads(loads_file, clock) for _ in range(SLOTS)]
    assert sorted(h.slot for h in held) == list(range(SLOTS))
    with pytest.raises(OSError, match="load slots"):
        ProcessLoads(loads_file, clock=clock)
