"""Solve-lane requests (plan, frontier, recommend) computed in worker processes.

A plan spends seconds in Python loops and in the HiGHS solver, which keeps the interpreter lock
for long stretches; on a thread of the server that stalls the event loop, and with it ``/healthz``
(measured: 3 s gaps during a 300-job plan). In a worker process it cannot. Each worker opens the
same store (by URL) with the same settings and runs the very same answer function; the request's
deadline travels with it, and a client that disconnects sets a flag in shared memory that the
worker's estimator checks, so the work stops there too.

Only a store the worker can reach by URL is offloaded (not an in-memory SQLite, nor a store a test
handed the app); otherwise the request runs on its thread as before.
"""

from __future__ import annotations

import atexit
import contextvars
import importlib
import multiprocessing
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from service.api import affinity
from service.api.lifetime import stop_processes
from service.api.limits import Ticket, WorkStopped, current_ticket, reset_ticket, set_ticket

SLOTS = 256
# Beyond its deadline a worker stops at its next estimate; a solve already running may take up to
# its own limit, so the thread waits this much longer before it gives up on the answer.
GRACE_S = 15.0

_pool_var: contextvars.ContextVar[SolvePool | None] = contextvars.ContextVar("gpucost_solve_pool", default=None)

# name -> (request model, answer function), both by import path so the worker can load them.
ANSWERS = {
    "plan": ("service.schemas:PlanRequest", "service.answers:plan_answer"),
    "frontier": ("service.schemas:QuoteRequest", "service.answers:frontier_answer"),
    "recommend": ("service.schemas:RecommendRequest", "service.answers:recommend_answer"),
}


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class SolvePool:
    def __init__(self, settings: Any, processes: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a threaded server
        self.flags = ctx.Array("b", SLOTS, lock=False)
        self.executor = ProcessPoolExecutor(
            max_workers=processes, mp_context=ctx, initializer=_init,
            initargs=(settings.model_dump(mode="json"), self.flags, affinity.allowed_cpus()),
        )
        self._free = list(range(SLOTS))
        self._lock = threading.Lock()
        self._closed = False
        # A server that exits without its lifespan's end (sys.exit, an unhandled error) still
        # stops its workers; a server killed outright is covered by the workers' own watch.
        atexit.register(self.close)

    def warm(self) -> None:
        """Start the workers and open their stores now, not on the first plan."""
        for fut in [self.executor.submit(_warm) for _ in range(self.executor._max_workers)]:  # noqa: SLF001
            fut.result(timeout=300)

    def close(self) -> None:
        """Stop the workers now, a solve in progress too: none may outlive the server."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)  # closed: nothing left for exit to do (nor to keep alive)
        processes = list((getattr(self.executor, "_processes", None) or {}).values())
        self.executor.shutdown(wait=False, cancel_futures=True)
        stop_processes(processes)

    def _slot(self) -> int:
        with self._lock:
            if not self._free:
                raise WorkStopped("too many requests in flight", 0)
            return self._free.pop()

    def _release(self, slot: int) -> None:
        with self._lock:
            self._free.append(slot)

    def run(self, name: str, request: Any, ticket: Ticket) -> Any:
        """The answer, computed in a worker; raises what the answer function raised there."""
        slot = self._slot()
        self.flags[slot] = 0
        fut: Future[Any] = self.executor.submit(
            _work, name, request.model_dump(mode="json"), ticket.remaining_s(), ticket.limit_s, slot
        )
        # The slot is the worker's until it finishes, even when this thread stops waiting.
        fut.add_done_callback(lambda _f: self._release(slot))
        give_up = time.monotonic() + max(0.0, ticket.remaining_s()) + GRACE_S
        while True:
            try:
                kind, payload = fut.result(timeout=0.05)
                break
            except FutureTimeout:
                if ticket.cancelled.is_set():
                    self.flags[slot] = 1
                if time.monotonic() > give_up:
                    self.flags[slot] = 1
                    raise WorkStopped(f"the request ran past its time limit of {ticket.limit_s:g} s",
                                      ticket.limit_s) from None
        if kind == "ok":
            return payload
        raise _rebuild(payload)


def offloaded(name: str, request: Any) -> tuple[bool, Any]:
    """(True, answer) when this request runs on the solve pool; (False, None) to run it here."""
    pool = _pool_var.get()
    ticket = current_ticket()
    if pool is None or ticket is None:
        return False, None
    return True, pool.run(name, request, ticket)


def use_pool(pool: SolvePool | None) -> contextvars.Token[SolvePool | None]:
    return _pool_var.set(pool)


def reset_pool(token: contextvars.Token[SolvePool | None]) -> None:
    _pool_var.reset(token)


# -- in the worker process ------------------------------------------------------------------

_STATE: dict[str, Any] = {}


def _init(settings_dump: dict[str, Any], flags: Any, cpus: frozenset[int] | None = None) -> None:
    from service.api.lifetime import end_with_parent
    from service.settings import Settings

    # Started from a server thread bound to one CPU (``service.api.affinity``): every CPU again.
    affinity.release_to(cpus)
    end_with_parent()

    _STATE["settings"] = Settings.model_validate(settings_dump)
    _STATE["flags"] = flags


def _store() -> Any:
    store = _STATE.get("store")
    if store is None:
        from pricing.store.repository import open_store

        settings = _STATE["settings"]
        store = open_store(settings.db_url)
        store.price_view = settings.price_view()
        _STATE["store"] = store
    return store


def _warm() -> None:
    _store().all_offers()
    for _, answer in ANSWERS.values():
        _load(answer)


def _work(name: str, request: dict[str, Any], remaining_s: float, limit_s: float, slot: int) -> tuple[str, Any]:
    flags = _STATE["flags"]
    ticket = Ticket(limit_s=limit_s, deadline=time.monotonic() + remaining_s, external=lambda: bool(flags[slot]))
    token = set_ticket(ticket)
    try:
        model_path, answer_path = ANSWERS[name]
        req = _load(model_path).model_validate(request)
        answer = _load(answer_path)
        result = answer(req, _store(), _STATE["settings"]) if name == "recommend" else answer(req, _store())
        return "ok", result
    except Exception as exc:  # noqa: BLE001 - handed back to the request's thread as it was
        return "err", (type(exc).__module__, type(exc).__qualname__, exc.args, dict(vars(exc)), str(exc))
    finally:
        reset_ticket(token)


def _rebuild(payload: tuple[str, str, tuple[Any, ...], dict[str, Any], str]) -> BaseException:
    module, qualname, args, attrs, text = payload
    try:
        cls = getattr(importlib.import_module(module), qualname)
        exc = cls.__new__(cls)
        exc.args = args
        exc.__dict__.update(attrs)
        return exc  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - an error we cannot rebuild is still reported
        return RuntimeError(text)
