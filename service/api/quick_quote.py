"""``POST /v1/quote`` for the request nearly every client sends, without FastAPI's per-request work.

A served quote for a new token count took about 3.4 ms of server CPU, and 0.2-0.27 ms of it was
FastAPI's routing, dependency solving and endpoint wrappers around the route function (one client,
one process, with and without this route: ``docs/performance-distinct.md``, thirtieth pass). This
route sits first among the app's routes and calls that same route function (``routes.quote.quote``)
with the same arguments FastAPI would give it, found the way FastAPI finds them, when the request
is plainly a JSON quote:

* ``POST`` with no query string (so the route's ``format`` is None, as FastAPI would read it);
* a ``Content-Type`` of ``application/json`` and a body that ``QuoteRequest`` validates as JSON
  (FastAPI's validator for the route's body is that model's). Pydantic reads the JSON itself, in
  one pass: a quote's body read after a 30 ms pause took 53-76 us against 95-130 us through
  ``json.loads`` and a dict (in process, 2026-12-06). What this route answers must be what
  FastAPI's reading (``json.loads``, then the model) makes of the body: a body the model takes as
  JSON is taken alike from ``json.loads``'s reading (``tests/fuzz/test_quote_body_parsing.py``).
  Pydantic's parser refuses a few that ``json.loads`` reads (a byte-order mark, UTF-16, an unpaired
  surrogate in a string); those go to FastAPI's route, which answers them as it always did;
* the price store already opened (the dependency itself, ``deps.get_store``, gives it).

It runs the function on the thread pool FastAPI runs sync routes on, or, for a job this process
computes quickly, with nothing else admitted and other clients quiet for a while, on the event loop
(``inline_quotes``), and sends the ``Response`` it returns, so the answer (JSON or, by ``Accept``,
Markdown) is the route's own. Anything else goes to the FastAPI route with the body as read: a
query string, another content type, a body that does not parse or validate, the first request
before the store is open. So 400s and 422s are FastAPI's own.
An exception raised while computing reaches the app's exception handlers as the route's would:
this route is inside Starlette's exception middleware, like FastAPI's routes
(``tests/integration/test_quick_quote.py`` holds the two paths to the same answers, byte for byte).
What it skips besides: FastAPI's own span for the route function, which FastAPI makes only when an
OpenTelemetry SDK is configured (gpucost configures none); its request span is still made.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import Match, Route

from service.api.deps import get_store
from service.api.inline_quotes import InlineQuotes
from service.api.middleware import header, replay
from service.api.routes.quote import quote
from service.schemas import QuoteRequest

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.responses import Response
    from starlette.types import Receive, Scope, Send

PATH = "/v1/quote"
# Set on a request this route hands to the FastAPI route (the router is asked again, and this route
# then does not match).
DECLINED = "gpucost.quick_quote_declined"


def _json_content(scope: Scope) -> bool:
    given = header(scope, b"content-type")
    return given is not None and given.split(b";", 1)[0].strip().lower() == b"application/json"


async def _body(receive: Receive) -> bytes | None:
    """The whole body; None if the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _validated(body: bytes) -> QuoteRequest | None:
    """The body's quote, or None where FastAPI is to answer it: whatever the model raises (a body
    that is not JSON, nested too deep, or not a valid quote), FastAPI's own reading of the body
    meets again, or reads, and answers as it does (400, 422, or a quote)."""
    try:
        return QuoteRequest.model_validate_json(body)
    except Exception:  # noqa: BLE001 - every refusal is FastAPI's to word
        return None


def _timed_quote(req: QuoteRequest, store: Any, http: Request) -> tuple[Response, float]:
    """The route's answer (a ``Response``: the route returns one) and the seconds it took to compute."""
    start = time.perf_counter()
    response = quote(req, store, http, None)
    return cast("Response", response), time.perf_counter() - start


class QuickQuote:
    """The ASGI app of ``QuickRoute``."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        # Which quotes are computed on the event loop; it reads the app's lanes (made before the
        # routes are installed: ``app.create_app``).
        self.inline = InlineQuotes(app.state.limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _body(receive)
        req = None
        if body is not None and not scope.get("query_string") and _json_content(scope):
            req = _validated(body)
        if req is None or getattr(self.app.state, "store", None) is None:
            scope[DECLINED] = True
            # A client gone before its body was read: FastAPI meets the disconnect as it would have.
            await self.app.router(scope, receive if body is None else replay(body, receive), send)
            return
        http = Request(scope, receive)
        store = await get_store(http)
        # A quote of a job this process computes quickly, with nothing else admitted and other
        # clients quiet for a while, is computed here rather than handed to a thread and back
        # (``inline_quotes``): the same call, the same answer.
        job = req.workload.rate_key()
        if self.inline.inline(job, scope.get("client")):
            response, seconds = _timed_quote(req, store, http)
        else:
            response, seconds = await run_in_threadpool(_timed_quote, req, store, http)
        self.inline.took(job, seconds)
        await response(scope, receive, send)


class QuickRoute(Route):
    """Matches ``POST /v1/quote`` only, and not a request it handed on (``DECLINED``)."""

    def __init__(self, app: FastAPI) -> None:
        super().__init__(PATH, QuickQuote(app), methods=["POST"], include_in_schema=False)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get(DECLINED):
            return Match.NONE, {}
        return super().matches(scope)


def install(app: FastAPI) -> None:
    """Put the quick route before every other route of ``app`` (after its routes are included)."""
    app.router.routes.insert(0, QuickRoute(app))
