"""The ASGI layer around the whole app: request ids, the body limit, answers already given,
admission, access log, metrics.

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
from typing import Any

import anyio

from service.api.answer_cache import CACHED_PATHS, AnswerCache
from service.api.limits import Limits, Ticket, WorkRefused, reset_ticket, set_ticket
from service.api.workers import SolvePool, reset_pool, use_pool
from service.logs import request_id_var

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 1_000_000
# A caller's id is echoed only when it is a plain token; anything else gets a fresh one, so a
# header cannot smuggle newlines or markup into logs.
_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")

access_log = logging.getLogger("gpucost.access")


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def request_id_of(scope: Scope) -> str:
    given = _header(scope, b"x-request-id")
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
        solve_pool: Callable[[], SolvePool | None] | None = None,
    ) -> None:
        self.solve_pool = solve_pool
        self.app = app
        self.limits = limits
        self.max_body_bytes = max_body_bytes
        self.observe = observe
        self.cache = cache
        self.store_version = store_version

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id_of(scope)
        scope.setdefault("state", {})["request_id"] = rid
        token = request_id_var.set(rid)
        status = [500]
        started = time.perf_counter()
        id_header = (b"x-request-id", rid.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), id_header]}
            await send(message)

        try:
            await self._handle(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            if self.observe is not None:
                self.observe(scope["method"], path, status[0], seconds)
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d %.1f ms", scope["method"], scope["path"], status[0], seconds * 1000,
                    extra={"event": "request", "method": scope["method"], "path": scope["path"],
                           "status": status[0], "ms": round(seconds * 1000, 2)},
                )
            request_id_var.reset(token)

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = _header(scope, b"content-length")
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
        has_body = length is not None or _header(scope, b"transfer-encoding") is not None
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

        if self.cache is not None and scope["method"] == "POST" and scope["path"] in CACHED_PATHS:
            version = await anyio.to_thread.run_sync(self._version)
            if version is not None:
                key = self.cache.key(
                    scope["path"], scope.get("query_string", b""), _header(scope, b"accept") or b"", body, version
                )
                hit = self.cache.get(key)
                if hit is not None:
                    await send({"type": "http.response.start", "status": hit.status,
                                "headers": [*hit.headers, (b"x-answer-cache", b"hit")]})
                    await send({"type": "http.response.body", "body": hit.body})
                    return
                send = self._remembering(send, key)

        lane = self.limits.lane_for(scope["method"], scope["path"])
        if lane is None:
            await self.app(scope, _replay(body, receive) if has_body else receive, send)
            return
        await self._admitted(lane, scope, body, receive, send)

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
                    await self.app(scope, _replay(body, None, gone), send)
                finally:
                    reset_pool(pooled)
                    reset_ticket(reset)
            finally:
                lane.release(time.monotonic() - begun)
        finally:
            watcher.cancel()


def _replay(body: bytes, receive: Receive | None, gone: asyncio.Event | None = None) -> Receive:
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
