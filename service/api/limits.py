"""Bounded work: how many expensive requests run at once, how many may wait, and for how long.

Every decision endpoint (quote, breakeven, plan, frontier, recommend) is admitted by a ``Lane``:
at most ``workers`` run at a time and at most ``queue`` wait; a request beyond that is answered
429 with ``Retry-After`` at once, and one that waits past its deadline gets the same. Plans,
frontiers and recommendations share the small ``solve`` lane, quotes and break-evens the larger
``quote`` lane, so a burst of 300-job plans cannot starve quotes, and neither can occupy more
than a bounded slice of the server's thread pool. ``/healthz`` and ``/readyz`` run on the event
loop and never enter a lane.

Each admitted request carries a ``Ticket``: one wall-clock deadline for the whole request (queue
wait and every solve it makes), and a cancellation flag set when the client disconnects. The
answer functions check it on every estimate (``guarded_estimator``) and give each solve only a
share of what is left (``solve_budget_s``), so work stops soon after the deadline or the client.
"""

from __future__ import annotations

import contextvars
import functools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")


class WorkRefused(Exception):
    """Too many requests already running and waiting: answered 429 with ``Retry-After``."""

    def __init__(self, lane: str, retry_after_s: int) -> None:
        self.lane = lane
        self.retry_after_s = retry_after_s
        super().__init__(f"the server is busy ({lane} requests); retry in {retry_after_s} s")


class WorkStopped(Exception):
    """The request ran past its wall-clock limit or its client went away.

    Deliberately not a ``GpucostError``: option generation treats those as "this GPU cannot run
    it" and carries on, and this must stop the whole request.
    """

    def __init__(self, reason: str, limit_s: float) -> None:
        self.reason = reason
        self.limit_s = limit_s
        super().__init__(reason)


@dataclass
class Ticket:
    """One request's deadline (``time.monotonic()`` seconds) and cancellation flag."""

    limit_s: float
    deadline: float
    cancelled: threading.Event = field(default_factory=threading.Event)
    # Another process's cancellation (a worker reads its request's flag in shared memory).
    external: Callable[[], bool] | None = None

    @classmethod
    def start(cls, limit_s: float) -> Ticket:
        return cls(limit_s=limit_s, deadline=time.monotonic() + limit_s)

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        if self.cancelled.is_set() or (self.external is not None and self.external()):
            raise WorkStopped("the client disconnected; the work was stopped", self.limit_s)
        if self.remaining_s() <= 0:
            raise WorkStopped(f"the request ran past its time limit of {self.limit_s:g} s", self.limit_s)


_current: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar("gpucost_ticket", default=None)


def current_ticket() -> Ticket | None:
    """The running request's ticket (threads started by the route inherit it); None in the CLI."""
    return _current.get()


def check_current() -> None:
    ticket = _current.get()
    if ticket is not None:
        ticket.check()


def guarded_estimator(base: Callable[..., T]) -> Callable[..., T]:
    """``base`` that first checks the request's ticket: a request past its deadline stops at its
    next estimate. Options made from what earlier requests kept (``candidates.cloud._kept``,
    ``candidates.local_sizes``) call no estimator, so a plan also checks before each job
    (``plan(checkpoint=check_current)``). Where ``base`` is the product's estimator, what option
    generation reads instead of an estimate where nothing fits (``or_unfit``) checks it too."""
    if _current.get() is None:
        return base

    # Declared a wrapper: the planner's cost floors follow ``base``'s formulas and still apply.
    @functools.wraps(base)
    def estimator(*args: Any, **kwargs: Any) -> T:
        check_current()
        return base(*args, **kwargs)

    from optimizer.candidates.estimator import unfit_reader  # loaded with the answers that guard

    reader = unfit_reader(base)  # type: ignore[arg-type]
    if reader is not None:
        # What option generation reads where no recipe fits (``candidates.estimator.unfit_reader``),
        # guarded the same way.
        def or_unfit(*args: Any) -> Any:
            check_current()
            return reader(*args)

        estimator.or_unfit = or_unfit  # type: ignore[attr-defined]
    return estimator


# The least a solve is given: HiGHS needs a moment even for a small model.
MIN_SOLVE_S = 0.5


def solve_budget_s(requested_s: float, solves: int) -> float:
    """Seconds for each of ``solves`` solves so that together they stay within both the caller's
    ``requested_s`` and what is left of the request's deadline."""
    budget = requested_s
    ticket = _current.get()
    if ticket is not None:
        budget = min(budget, ticket.remaining_s())
    return max(MIN_SOLVE_S, budget / max(1, solves))


class Lane:
    """At most ``workers`` requests run and ``queue`` wait; the rest are refused."""

    def __init__(self, name: str, workers: int, queue: int) -> None:
        self.name = name
        self.workers = max(1, workers)
        self.queue = max(0, queue)
        self.running = 0
        self.waiting = 0
        self._sem: asyncio.Semaphore | None = None
        # Smoothed service time, for an honest Retry-After.
        self._mean_s = 1.0
        # When each running request got its worker (by its ticket).
        self._started: dict[int, float] = {}
        # When a request last gave its worker back (``time.monotonic``) and the connection it came
        # on, and when one from any other connection last did: how long other clients have left
        # this lane quiet (``inline_quotes``).
        self.released_at = -math.inf
        self.released_on: object = None
        self._others_released_at = -math.inf

    def _semaphore(self) -> asyncio.Semaphore:
        # Made on first use, inside the server's event loop (asyncio is imported there: a CLI
        # command that uses this module's budgets never loads it).
        if self._sem is None:
            import asyncio

            self._sem = asyncio.Semaphore(self.workers)
        return self._sem

    def service_s(self) -> float:
        """What one request takes here: the smoothed time of those that finished, or longer
        while the running ones have already been at it longer (a stuck lane says so)."""
        now = time.monotonic()
        ages = [now - t for t in self._started.values()]
        return max(self._mean_s, sum(ages) / len(ages)) if ages else self._mean_s

    def expected_wait_s(self) -> float:
        """How long a request arriving now would wait for a worker."""
        if self.running + self.waiting < self.workers:
            return 0.0
        return self.service_s() * (self.running + self.waiting + 1 - self.workers) / self.workers

    def retry_after_s(self) -> int:
        backlog = self.running + self.waiting + 1
        return max(1, math.ceil(self.service_s() * backlog / self.workers))

    def refusal(self, remaining_s: float) -> WorkRefused | None:
        """Why a request with ``remaining_s`` left would be refused now; None if it may wait."""
        if self.running >= self.workers and self.waiting >= self.queue:
            return WorkRefused(self.name, self.retry_after_s())
        # Shed now rather than after a wait that cannot end in time: a request whose expected
        # queue wait already exceeds its whole time limit would only be refused at its deadline.
        if self.expected_wait_s() >= remaining_s:
            return WorkRefused(self.name, self.retry_after_s())
        return None

    async def acquire(self, ticket: Ticket) -> None:
        import asyncio

        sem = self._semaphore()
        refused = self.refusal(ticket.remaining_s())
        if refused is not None:
            raise refused
        self.waiting += 1
        try:
            await asyncio.wait_for(sem.acquire(), timeout=max(0.0, ticket.remaining_s()))
        except TimeoutError:
            raise WorkRefused(self.name, self.retry_after_s()) from None
        finally:
            self.waiting -= 1
        self.running += 1
        self._started[id(ticket)] = time.monotonic()

    def release(self, seconds: float, ticket: Ticket | None = None, connection: object = None) -> None:
        """A request's worker given back; ``connection``: the client connection it came on
        (ASGI's ``scope["client"]``), None if unknown."""
        self.running -= 1
        if ticket is not None:
            self._started.pop(id(ticket), None)
        self._mean_s = 0.8 * self._mean_s + 0.2 * seconds
        if connection is None or connection != self.released_on:
            self._others_released_at = self.released_at
            self.released_on = connection
        self.released_at = time.monotonic()
        self._semaphore().release()

    def others_released_at(self, connection: object) -> float:
        """When a request from a connection other than ``connection`` last gave its worker back
        here (``-inf``: never)."""
        if connection is not None and connection == self.released_on:
            return self._others_released_at
        return self.released_at


class ClientLimit:
    """At most ``most`` expensive requests in flight (running or queued) per client address, so
    one caller's flood fills its own share and not every lane (0: no limit)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.in_flight: dict[str, int] = {}

    def enter(self, client: str) -> bool:
        if self.most <= 0:
            return True
        count = self.in_flight.get(client, 0)
        if count >= self.most:
            return False
        self.in_flight[client] = count + 1
        return True

    def leave(self, client: str) -> None:
        if self.most <= 0:
            return
        count = self.in_flight.get(client, 0) - 1
        if count > 0:
            self.in_flight[client] = count
        else:
            self.in_flight.pop(client, None)


@dataclass(frozen=True)
class Limits:
    """The lanes of one app and the paths each one admits."""

    lanes: dict[str, Lane]
    routes: dict[str, str]
    time_limit_s: float
    clients: ClientLimit = field(default_factory=lambda: ClientLimit(0))

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        solve = Lane("solve", settings.max_solves, settings.solve_queue)
        quote = Lane("quote", settings.max_quotes, settings.quote_queue)
        routes = {
            "/v1/plan": "solve", "/v1/frontier": "solve", "/v1/recommend": "solve",
            "/v1/quote": "quote", "/v1/breakeven": "quote", "/v1/estimate": "quote",
        }
        return cls(lanes={"solve": solve, "quote": quote}, routes=routes,
                   time_limit_s=settings.request_time_limit_s,
                   clients=ClientLimit(getattr(settings, "max_requests_per_client", 0)))

    def lane_for(self, method: str, path: str) -> Lane | None:
        if method != "POST":
            return None
        name = self.routes.get(path.rstrip("/") or "/")
        return self.lanes[name] if name else None


def set_ticket(ticket: Ticket | None) -> contextvars.Token[Ticket | None]:
    return _current.set(ticket)


def reset_ticket(token: contextvars.Token[Ticket | None]) -> None:
    _current.reset(token)
