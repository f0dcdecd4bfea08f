"""``service.api.inline_quotes``: a quote goes on the event loop only for a job last computed within
the limit, only while nothing else is admitted in any lane, and only after the lanes were quiet."""

from __future__ import annotations

import math

import pytest

from service.api import limits as limits_module
from service.api.inline_quotes import INLINE_MAX_S, QUIET_S, InlineQuotes
from service.api.limits import Lane, Limits


def _limits() -> Limits:
    return Limits(lanes={"quote": Lane("quote", 4, 8), "solve": Lane("solve", 1, 2)},
                  routes={"/v1/quote": "quote", "/v1/plan": "solve"}, time_limit_s=30.0)


def _admitted(limits: Limits) -> InlineQuotes:
    limits.lanes["quote"].running = 1  # the quote asking
    return InlineQuotes(limits)


def test_a_job_not_seen_goes_to_a_thread() -> None:
    assert not _admitted(_limits()).inline("job")


def test_a_job_last_computed_within_the_limit_goes_on_the_loop_and_one_beyond_it_does_not() -> None:
    inline = _admitted(_limits())
    inline.took("quick", 0.002)
    inline.took("at the limit", INLINE_MAX_S)
    inline.took("slow", INLINE_MAX_S * 1.01)
    assert inline.inline("quick")
    assert inline.inline("at the limit")
    assert not inline.inline("slow")


def test_the_last_time_decides() -> None:
    inline = _admitted(_limits())
    inline.took("job", 0.001)
    inline.took("job", 0.020)  # a new model's estimates, say
    assert not inline.inline("job")
    inline.took("job", 0.001)
    assert inline.inline("job")


def test_any_other_request_running_or_waiting_in_any_lane_sends_it_to_a_thread() -> None:
    limits = _limits()
    inline = _admitted(limits)
    inline.took("job", 0.001)
    for lane, field in (("quote", "running"), ("quote", "waiting"), ("solve", "running"), ("solve", "waiting")):
        setattr(limits.lanes[lane], field, getattr(limits.lanes[lane], field) + 1)
        assert not inline.inline("job"), (lane, field)
        setattr(limits.lanes[lane], field, getattr(limits.lanes[lane], field) - 1)
        assert inline.inline("job"), (lane, field)


def test_the_oldest_job_is_forgotten_past_the_bound() -> None:
    limits = _limits()
    limits.lanes["quote"].running = 1
    inline = InlineQuotes(limits, max_jobs=3)
    for job in ("a", "b", "c"):
        inline.took(job, 0.001)
    assert inline.inline("a")  # a read does not refresh it: only a new time does
    inline.took("b", 0.001)
    inline.took("d", 0.001)  # "a" is now the oldest timed, and goes
    assert not inline.inline("a")
    assert all(inline.inline(job) for job in ("b", "c", "d"))


ME, OTHER = ("127.0.0.1", 50001), ("127.0.0.1", 50002)


def _release(lane: Lane, at: float, connection: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request that came on ``connection`` gives its worker back at ``at``."""
    monkeypatch.setattr(limits_module.time, "monotonic", lambda: at)
    lane.running += 1
    lane.release(0.001, connection=connection)


def _clocked(limits: Limits) -> tuple[InlineQuotes, list[float]]:
    """A quick job's choice for a quote admitted in ``limits``, on a clock the test moves."""
    limits.lanes["quote"].running = 1
    now = [100.0]
    inline = InlineQuotes(limits, clock=lambda: now[0])
    inline.took("job", 0.001)
    return inline, now


def test_only_after_other_connections_left_every_lane_quiet_for_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = _limits()
    inline, now = _clocked(limits)
    assert inline.inline("job", ME)  # nothing ever finished here
    for name in ("quote", "solve"):
        _release(limits.lanes[name], now[0], OTHER, monkeypatch)  # another client's request, just now
        assert not inline.inline("job", ME), name
        now[0] += QUIET_S * 0.9
        assert not inline.inline("job", ME), name
        now[0] += QUIET_S * 0.2
        assert inline.inline("job", ME), name


def test_the_asking_connections_own_requests_leave_it_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = _limits()
    inline, now = _clocked(limits)
    _release(limits.lanes["quote"], now[0] - 2 * QUIET_S, OTHER, monkeypatch)
    _release(limits.lanes["quote"], now[0], ME, monkeypatch)  # this client's last quote, just now
    assert inline.inline("job", ME)  # one client's requests, one after another
    assert not inline.inline("job", ("127.0.0.1", 50003))  # for anyone else, ME was just served
    assert not inline.inline("job", None)  # nor for a connection not known


def test_a_lane_keeps_the_last_release_by_any_other_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    lane = Lane("quote", 2, 2)
    assert lane.others_released_at(ME) == -math.inf
    third = ("127.0.0.1", 50003)
    for at, connection in ((1.0, ME), (2.0, ME), (3.0, OTHER)):
        _release(lane, at, connection, monkeypatch)
    assert lane.released_at == 3.0
    assert (lane.others_released_at(OTHER), lane.others_released_at(ME), lane.others_released_at(third)) == (2.0, 3.0, 3.0)
    _release(lane, 4.0, ME, monkeypatch)
    assert (lane.others_released_at(ME), lane.others_released_at(OTHER)) == (3.0, 4.0)
    _release(lane, 5.0, None, monkeypatch)  # a connection not known is nobody's own
    assert (lane.others_released_at(ME), lane.others_released_at(None)) == (5.0, 5.0)
    _release(lane, 6.0, None, monkeypatch)
    assert lane.others_released_at(None) == 6.0
