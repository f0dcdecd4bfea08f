"""The ASGI layer around the whole app: request ids, the body limit, answers already given,
admission, access log, metrics, and (``balance``) the connection a busier process hands on.

One pure-ASGI class rather than a stack of ``BaseHTTPMiddleware``: it sits outside Starlette's
error middleware, so even a 500 carries ``X-Request-ID``, and it adds next to nothing to a request
that only needs an id (``/healthz``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from service.api import heap
from service.api.answer_cache import CACHED_PATHS, AnswerCache
from service.api.balance import ProcessLoads
from service.api.limits import Limits, Ticket, WorkRefused, reset_ticket, set_ticket
from service.api.security_headers import with_security_headers
from service.api.store_check import PRICED_PATHS, UNSET, StoreCheck
from service.api.workers import SolvePool, reset_pool, use_pool
from service.logs import request_id_var

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1_000_000
CLOSE = (b"connection", b"close")
# A request about to be refused may still get an answer from the cache, if the prices' version
# was read this recently (no thread is waited for to read it again).
FRESH_VERSION_S = 1.0
# A caller's id is echoed only when it is a plain token; anything else gets a fresh one, so a
# header cannot smuggle newlines or markup into logs.
_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")

access_log = logging.getLogger("gpucost.access")
logger = logging.getLogger(__name__)


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def request_id_of(scope: Scope) -> str:
    given = header(scope, b"x-request-id")
    if given:
        text = given.decode("latin-1")
        if _ID.match(text):
            return text
    return uuid.uuid4().hex


async def _reply(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    body = json.dumps({"detail": detail}).encode()
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    *headers],
    })
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    """Request id in and out, 413 beyond ``max_body_bytes``, lanes for the expensive routes."""

    def __init__(
        self, app: ASGIApp, *, limits: Limits, max_body_bytes: int = MAX_BODY_BYTES,
        observe: Callable[[str, str, int, float], None] | None = None,
        cache: AnswerCache | None = None,
        store_version: Callable[[], str | None] | None = None,
        version_if_unchanged: Callable[[], str | None] | None = None,
        solve_pool: Callable[[], SolvePool | None] | None = None,
        store_check: StoreCheck | None = None,
        route_of: Callable[[Scope], str] | None = None,
        loads: ProcessLoads | None = None,
    ) -> None:
        self.loads = loads
        self.store_check = store_check
        self.route_of = route_of
        self.solve_pool = solve_pool
        self.app = app
        self.limits = limits
        self.max_body_bytes = max_body_bytes
        self.observe = observe
        self.cache = cache
        self.store_version = store_version
        self.version_if_unchanged = version_if_unchanged
        self._version_task: asyncio.Future[str | None] | None = None
        self._check_task: asyncio.Future[str | None] | None = None
        self._version_seen: str | None = None
        self._version_at = -1e18
        self._version_thread = ThreadPoolExecutor(1, thread_name_prefix="gpucost-version")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id_of(scope)
        scope.setdefault("state", {})["request_id"] = rid
        token = request_id_var.set(rid)
        status = [500]
        started = time.perf_counter()
        frozen_mark = heap.request_started()
        id_header = (b"x-request-id", rid.encode())
        loads = self.loads
        if loads is not None:
            loads.started()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [*with_security_headers(message, scope["path"]), id_header]
                if loads is not None and loads.should_close():
                    headers.append(CLOSE)  # this process holds more than its share: see balance.py
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self._handle(scope, receive, send_with_id)
        finally:
            if loads is not None:
                loads.ended()
            seconds = time.perf_counter() - started
            route = scope.get("route")
            # Answers given here (the cache, 429, 413) and routes FastAPI adds itself
            # (/openapi.json) carry no route: find its template rather than say "unmatched".
            path = getattr(route, "path", None) or (self.route_of(scope) if self.route_of else "unmatched")
            if self.observe is not None:
                self.observe(scope["method"], path, status[0], seconds)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d %.1f ms", scope["method"], scope["path"], status[0], seconds * 1000,
                    extra={"event": "request", "method": scope["method"], "path": scope["path"],
                           "status": status[0], "ms": round(seconds * 1000, 2)},
                )
            request_id_var.reset(token)
            # Between requests, never inside the collector: what this request kept is frozen.
            heap.request_ended(frozen_mark, status[0])

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = header(scope, b"content-length")
        limit = self.max_body_bytes
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _reply(send, 400, "Content-Length is not a number")
                return
            if declared > limit:
                await _reply(send, 413, f"request body over the limit of {limit:,} bytes")
                return
        has_body = length is not None or header(scope, b"transfer-encoding") is not None
        body = b""
        if has_body:
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    await _reply(send, 413, f"request body over the limit of {limit:,} bytes")
                    return
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            body = b"".join(chunks)

        if self.store_check is not None and scope["method"] == "POST" and scope["path"] in PRICED_PATHS:
            problem = await self._store_problem()
            if problem:
                # Said, not answered from half the rows; /readyz gives the same reason.
                await _reply(send, 503, f"no answer from a damaged store: {problem}")
                return

        lane = self.limits.lane_for(scope["method"], scope["path"])
        cacheable = self.cache is not None and scope["method"] == "POST" and scope["path"] in CACHED_PATHS
        refusal = self._refusal(lane, scope) if lane is not None else None
        if refusal is not None:
            # Refused at once, without waiting for a thread: only an answer already cached under
            # a version read in the last moment is still given.
            if cacheable and await self._send_cached(scope, body, send, self._fresh_version()):
                return
            status, detail, retry_after = refusal
            await _reply(send, status, detail, [(b"retry-after", str(retry_after).encode())])
            return

        if cacheable:
            version = await self._recent_version()
            if await self._send_cached(scope, body, send, version):
                return
            if version is not None:
                send = self._remembering(send, self._cache_key(scope, body, version))

        if lane is None:
            await self.app(scope, replay(body, receive) if has_body else receive, send)
            return
        await self._admitted(lane, scope, body, receive, send)

    def _refusal(self, lane: Any, scope: Scope) -> tuple[int, str, int] | None:
        """(429, why, Retry-After) when this request would be refused: its client has its share
        in flight, or the lane is full (or would make it wait past its whole time limit)."""
        clients = self.limits.clients
        if clients.most > 0 and clients.in_flight.get(_client_of(scope), 0) >= clients.most:
            return (429, f"too many requests from this client: at most {clients.most} may run or wait at once",
                    lane.retry_after_s())
        refused = lane.refusal(self.limits.time_limit_s)
        if refused is not None:
            return 429, str(refused), refused.retry_after_s
        return None

    def _cache_key(self, scope: Scope, body: bytes, version: str) -> str:
        assert self.cache is not None
        return self.cache.key(scope["path"], scope.get("query_string", b""), header(scope, b"accept") or b"", body,
                              version)

    async def _send_cached(self, scope: Scope, body: bytes, send: Send, version: str | None) -> bool:
        if version is None or self.cache is None:
            return False
        hit = self.cache.get(self._cache_key(scope, body, version))
        if hit is None:
            return False
        await send({"type": "http.response.start", "status": hit.status,
                    "headers": [*hit.headers, (b"x-answer-cache", b"hit")]})
        await send({"type": "http.response.body", "body": hit.body})
        return True

    def _fresh_version(self) -> str | None:
        """The prices' version if it was read within ``FRESH_VERSION_S``; else None (no cache)."""
        if time.monotonic() - self._version_at <= FRESH_VERSION_S:
            return self._version_seen
        return None

    async def _store_problem(self) -> str | None:
        """The store check's answer. Past its interval the check runs again on its own thread and
        this request (and every other meanwhile) takes the last answer: only the first check is
        waited for."""
        check = self.store_check
        assert check is not None
        seen = check.cached()
        if seen is not UNSET:
            return seen  # type: ignore[no-any-return]
        task = self._check_task
        if task is None or task.done():
            task = self._check_task = asyncio.get_running_loop().run_in_executor(self._version_thread, check.check)
            task.add_done_callback(_log_failed_check)
        last = check.last()
        if last is not UNSET:
            return last  # type: ignore[no-any-return]
        return await asyncio.shield(task)

    async def _recent_version(self) -> str | None:
        """The prices' version, for the answer cache's key. Requests that arrive while a read is
        under way share it, and the read runs on a thread of its own: under a burst each request
        would otherwise wait for a pool thread (behind the busy ones) before it is even admitted
        or refused, and 429s would take seconds to arrive. When the store can tell at once that
        nothing was committed since the last read (``answer_cache.StoreVersion``), that version is
        taken here, without the thread."""
        if self.version_if_unchanged is not None:
            try:
                same = self.version_if_unchanged()
            except Exception:  # noqa: BLE001 - the read below decides
                same = None
            if same is not None:
                self._version_seen, self._version_at = same, time.monotonic()
                return same
        task = self._version_task
        if task is None:
            loop = asyncio.get_running_loop()
            task = self._version_task = loop.run_in_executor(self._version_thread, self._version)
        try:
            version = await asyncio.shield(task)
        finally:
            if self._version_task is task and task.done():
                self._version_task = None
        self._version_seen, self._version_at = version, time.monotonic()
        return version

    def _version(self) -> str | None:
        """The prices' version, when the store is open and answers; None turns the cache off."""
        if self.store_version is None:
            return None
        try:
            return self.store_version()
        except Exception:  # noqa: BLE001 - no cache is the safe answer to any doubt
            return None

    def _remembering(self, send: Send, key: str) -> Send:
        start: dict[str, Any] = {}
        chunks: list[bytes] = []
        cache = self.cache
        assert cache is not None

        async def remember(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and start.get("status") == 200:
                    cache.put(key, 200, list(start.get("headers", ())), b"".join(chunks))
            await send(message)

        return remember

    async def _admitted(self, lane: Any, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        ticket = Ticket.start(self.limits.time_limit_s)
        gone = asyncio.Event()

        async def watch() -> None:
            # The body is read: the next message the server sends is the client going away.
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    ticket.cancelled.set()
                    gone.set()
                    return

        client = _client_of(scope)
        clients = self.limits.clients
        if not clients.enter(client):
            await _reply(
                send, 429,
                f"too many requests from this client: at most {clients.most} may run or wait at once",
                [(b"retry-after", str(lane.retry_after_s()).encode())],
            )
            return
        watcher = asyncio.create_task(watch())
        try:
            try:
                await lane.acquire(ticket)
            except WorkRefused as exc:
                await _reply(send, 429, str(exc), [(b"retry-after", str(exc.retry_after_s).encode())])
                return
            begun = time.monotonic()
            try:
                if ticket.cancelled.is_set():
                    return  # left while queued: nobody to answer
                reset = set_ticket(ticket)
                pooled = use_pool(self.solve_pool() if lane.name == "solve" and self.solve_pool else None)
                try:
                    await self.app(scope, replay(body, None, gone), send)
                finally:
                    reset_pool(pooled)
                    reset_ticket(reset)
            finally:
                lane.release(time.monotonic() - begun, ticket, scope.get("client"))
        finally:
            watcher.cancel()
            clients.leave(client)


def _log_failed_check(task: asyncio.Future[str | None]) -> None:
    """A store check that raised, which nobody may be awaiting: logged (the next request retries)."""
    if not task.cancelled() and task.exception() is not None:
        logger.warning("the store check failed: %s", task.exception())


def _client_of(scope: Scope) -> str:
    return str((scope.get("client") or ("unknown", 0))[0])


def replay(body: bytes, receive: Receive | None, gone: asyncio.Event | None = None) -> Receive:
    """A ``receive`` that hands the app the body already read, then the real stream (or, where
    a watcher owns the real stream, the disconnect it saw)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if receive is not None:
            return await receive()
        assert gone is not None
        await gone.wait()
        return {"type": "http.disconnect"}

    return replay
