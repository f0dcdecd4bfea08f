"""What the served stack costs a quote beyond computing it: the app called in this process with the
answer already made.

    .venv/bin/python bench/http_overhead.py [--runs 500] [--kinds restricted,open]

Builds the real app (``service.api.app.create_app``: the guard middleware, FastAPI's routing,
dependencies and body validation, the thread the route runs on, the JSON answer) over a fresh
SQLite store with the bundled snapshot and calls it as an ASGI server would, without a socket or
another process: one quote of each kind (``bench/ab_quotes.py``'s) is computed first, and
``quote_answer`` then hands that same answer back, so what is timed is everything but the
computation. ``GET /healthz`` is timed the same way, in turn, as the floor. The bodies differ on
every call (a new token count), so the answer cache, were it on, would never answer; it is off.
Prints p50 per path and what a quote adds to ``/healthz``. Nothing leaves this process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from workdir import work_folder  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from ab_quotes import body  # the same kinds of distinct question


async def call(app: Any, method: str, path: str, payload: bytes = b"") -> int:
    """One request through the ASGI app; its status."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode())],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }
    sent: list[dict[str, Any]] = []
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


async def run(app: Any, kinds: list[str], runs: int) -> None:
    async with app.router.lifespan_context(app):
        n = 0
        for kind in kinds:
            for _ in range(20):  # warm: the store opened, the answer made, the threads started
                n += 1
                assert await call(app, "POST", "/v1/quote", json.dumps(body(kind, n, 7)).encode()) == 200
            quote: list[float] = []
            health: list[float] = []
            for i in range(runs):
                n += 1
                payload = json.dumps(body(kind, n, 7)).encode()
                for which in (("q", "h") if i % 2 else ("h", "q")):
                    t = time.perf_counter()
                    status = await (call(app, "POST", "/v1/quote", payload) if which == "q"
                                    else call(app, "GET", "/healthz"))
                    (quote if which == "q" else health).append(time.perf_counter() - t)
                    assert status == 200, status
            q, h = statistics.median(quote), statistics.median(health)
            print(f"  {kind:10} POST /v1/quote {q * 1e6:7.0f} us   GET /healthz {h * 1e6:5.0f} us"
                  f"   a quote adds {(q - h) * 1e6:5.0f} us beyond computing it")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--kinds", default="restricted,open", help="ab_quotes.py's kinds: restricted, open")
    args = ap.parse_args()
    work = work_folder("gpucost-overhead-")
    os.environ.update(GPUCOST_DB_URL=f"sqlite:///{work / 'g.sqlite'}", XDG_DATA_HOME=str(work),
                      GPUCOST_ANSWER_CACHE="false", AWS_EC2_METADATA_DISABLED="true", NO_GCE_CHECK="true")
    sys.path.insert(0, str(REPO))
    import service.api.routes.quote as route
    from service.api.app import create_app

    made: dict[str, Any] = {}
    compute = route.quote_answer

    def answered(req: Any, store: Any) -> Any:
        # The first answer of each kind is computed; the same one is handed back after that.
        kind = "restricted" if req.constraints.gpus else "open"
        if kind not in made:
            made[kind] = compute(req, store)
        return made[kind]

    route.quote_answer = answered  # type: ignore[assignment]
    import uvloop

    print(f"p50 of {args.runs} each, taken in turn, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}:")
    uvloop.run(run(create_app(), [k for k in args.kinds.split(",") if k], args.runs))


if __name__ == "__main__":
    main()
