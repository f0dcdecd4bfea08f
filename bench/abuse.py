"""The server under the small requests that used to take it down (issue 20), on loopback.

    .venv/bin/python bench/abuse.py [--json] [--burst 300] [--bursts 5] [--per-client N]

Starts ``gpucost serve`` on a free 127.0.0.1 port with a SQLite store in a temporary folder
(its solve workers included), then:

1. ``idle``: the p50 of ``--normal`` distinct quotes, one at a time, on an idle server.
2. ``attack``: six concurrent ResNet configs with ``depths: [3, 4, 100000000, 3]`` (400 bytes
   each; they used to compute for tens of minutes), then the same number of distinct normal
   quotes: their p50 against the idle one, and any 5xx.
3. ``burst``: ``--burst`` distinct quotes at once, ``--bursts`` times: the latency of every 429
   (the target: each under 100 ms) and the server's resident memory (its workers included) after
   each burst (the target: flat within 10 %). The client opens every connection first, then
   writes every request in one go and times each from its own write to its status line: the
   server's answer time. The same requests timed from the start of their connection (the client's
   own loop opening 300 sockets included) are reported beside it, and so is this client's floor:
   the same burst against a bare asyncio server that answers 429 at once, in its own process.

Every loop is bounded (counts given, each request with a timeout) and the server is stopped at
the end, whatever happened. Linux only (reads /proc through psutil).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
ATTACK = {
    "workload": {
        "model": {"hf_config": {
            "model_type": "resnet", "layer_type": "bottleneck", "embedding_size": 64, "num_channels": 3,
            "hidden_sizes": [256, 512, 1024, 2048], "depths": [3, 4, 100_000_000, 3],
        }},
        "samples": 1_000_000,
    },
}
REQUEST_TIMEOUT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _normal(i: int) -> dict[str, Any]:
    # Distinct bodies: the server's answer cache must not answer them.
    return {"workload": {"model": "gpt2", "tokens": 100_000_000 + 1_000 * i}}


def _post(port: int, path: str, body: dict[str, Any]) -> tuple[int, float]:
    data = json.dumps(body).encode()
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        status = resp.status
    except OSError:
        status = 0  # refused or timed out: counted as an error
    finally:
        conn.close()
    return status, time.perf_counter() - started


async def _post_async(port: int, body: dict[str, Any]) -> tuple[int, float]:
    data = json.dumps(body).encode()
    head = (f"POST /v1/quote HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    started = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), REQUEST_TIMEOUT_S)
        writer.write(head + data)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
        elapsed = time.perf_counter() - started  # the status line: when the answer arrived
        await asyncio.wait_for(reader.read(), REQUEST_TIMEOUT_S)
        writer.close()
        return int(line.split()[1]), elapsed
    except (OSError, TimeoutError, IndexError, ValueError):
        return 0, time.perf_counter() - started


async def _burst(port: int, bodies: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """Every connection opened, then every request written at once: (status, seconds from the
    request's write to its status line, seconds from the start of its connection)."""
    opened = time.perf_counter()
    conns = await asyncio.gather(*(asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), REQUEST_TIMEOUT_S)
                                   for _ in bodies), return_exceptions=True)
    written: list[float] = []
    for conn, body in zip(conns, bodies):
        if not isinstance(conn, BaseException):
            data = json.dumps(body).encode()
            conn[1].write(f"POST /v1/quote HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        written.append(time.perf_counter())

    async def answer(i: int) -> tuple[int, float, float]:
        conn = conns[i]
        if isinstance(conn, BaseException):
            return 0, 0.0, time.perf_counter() - opened
        reader, writer = conn
        try:
            line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT_S)
            now = time.perf_counter()
            await asyncio.wait_for(reader.read(), REQUEST_TIMEOUT_S)
            return int(line.split()[1]), now - written[i], now - opened
        except (OSError, TimeoutError, IndexError, ValueError):
            now = time.perf_counter()
            return 0, now - written[i], now - opened
        finally:
            writer.close()

    return list(await asyncio.gather(*(answer(i) for i in range(len(bodies)))))


_BARE_SERVER = """
import asyncio, sys
async def answer(reader, writer):
    try:
        await reader.readuntil(b"\\r\\n\\r\\n")
    except (OSError, asyncio.IncompleteReadError):
        writer.close()
        return
    body = b'{"detail": "busy"}'
    writer.write(b"HTTP/1.1 429 Too Many Requests\\r\\ncontent-length: %d\\r\\nconnection: close\\r\\n\\r\\n"
                 % len(body) + body)
    await writer.drain()
    writer.close()
async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", int(sys.argv[1]), backlog=2048)
    await server.serve_forever()
asyncio.run(main())
"""


def _client_floor(burst: int, bursts: int) -> float:
    """The slowest answer this client measures from a server that does nothing but answer 429."""
    port = _free_port()
    bare = subprocess.Popen([sys.executable, "-c", _BARE_SERVER, str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or bare.poll() is not None:
                    raise RuntimeError("the bare asyncio server did not start") from None
                time.sleep(0.05)
        worst = 0.0
        for _ in range(bursts):
            results = asyncio.run(_burst(port, [_normal(i) for i in range(burst)]))
            worst = max(worst, max(t for _, t, _ in results))
        return worst
    finally:
        bare.kill()
        bare.wait()


def _concurrently(port: int, bodies: list[dict[str, Any]]) -> list[tuple[int, float]]:
    """All at once from one event loop: 300 client threads would take the server's CPU."""

    async def all_of() -> list[tuple[int, float]]:
        return list(await asyncio.gather(*(_post_async(port, b) for b in bodies)))

    return asyncio.run(all_of())


def _refusals_in_log(path: Path, start: int) -> list[float]:
    """Milliseconds of each 429 the server logged after byte ``start`` of its JSON log."""
    out = []
    with path.open("rb") as fh:
        fh.seek(start)
        for line in fh:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if doc.get("event") == "request" and doc.get("status") == 429:
                out.append(float(doc["ms"]))
    return out


def _rss_mb(proc: psutil.Process) -> float:
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total / 1e6


def _p(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(burst: int, bursts: int, normal: int, per_client: int | None, settings: dict[str, str] | None = None) -> dict[str, Any]:
    port = _free_port()
    tmp = Path(tempfile.mkdtemp(prefix="gpucost-abuse-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCOST_")}
    env.update(GPUCOST_DB_URL=f"sqlite:///{tmp / 'prices.sqlite'}", AWS_EC2_METADATA_DISABLED="true",
               NO_GCE_CHECK="true")
    if per_client is not None:
        env["GPUCOST_MAX_REQUESTS_PER_CLIENT"] = str(per_client)
    env.update(settings or {})
    log = (tmp / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-c", "from service.cli import main; main()", "serve", "--host", "127.0.0.1",
         "--port", str(port), "--log-format", "json"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"gpucost serve exited {server.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=30) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gpucost serve was not ready within 120 s")
            time.sleep(0.3)
        proc = psutil.Process(server.pid)
        _post(port, "/v1/quote", _normal(-1))  # warm: the first quote reads the offers

        idle = [_post(port, "/v1/quote", _normal(i)) for i in range(normal)]
        attack_started = time.perf_counter()
        attacks = _concurrently(port, [ATTACK] * 6)
        attack_s = time.perf_counter() - attack_started
        after = [_post(port, "/v1/quote", _normal(1_000 + i)) for i in range(normal)]
        idle_p50 = statistics.median(t for _, t in idle)
        after_p50 = statistics.median(t for _, t in after)

        log.flush()
        log_start = (tmp / "serve.log").stat().st_size
        rss = [_rss_mb(proc)]
        refusals: list[float] = []
        from_connect: list[float] = []
        worst_per_burst: list[float] = []
        codes: dict[int, int] = {}
        for b in range(bursts):
            results = asyncio.run(_burst(port, [_normal(10_000 * (b + 1) + i) for i in range(burst)]))
            worst_per_burst.append(max((t for st, t, _ in results if st == 429), default=0.0))
            for status, seconds, since_connect in results:
                codes[status] = codes.get(status, 0) + 1
                if status == 429:
                    refusals.append(seconds)
                    from_connect.append(since_connect)
            rss.append(_rss_mb(proc))
        inside = _refusals_in_log(tmp / "serve.log", log_start)
        result = {
            "server": {"cpus": os.cpu_count(), "per_client_limit": per_client if per_client is not None else "default"},
            "attack": {
                "statuses": sorted(s for s, _ in attacks), "seconds_for_six": round(attack_s, 3),
                "normal_p50_idle_ms": round(idle_p50 * 1000, 1), "normal_p50_after_ms": round(after_p50 * 1000, 1),
                "ratio": round(after_p50 / idle_p50, 2),
                "normal_5xx": sum(1 for s, _ in idle + after if s >= 500 or s == 0),
            },
            "burst": {
                "requests": burst * bursts, "statuses": dict(sorted(codes.items())),
                "refused_429": len(refusals),
                "refusal_ms_p50": round(_p(refusals, 0.5) * 1000, 1),
                "refusal_ms_p99": round(_p(refusals, 0.99) * 1000, 1),
                "refusal_ms_max": round(max(refusals) * 1000, 1) if refusals else None,
                "refusals_over_100ms": sum(1 for s in refusals if s > 0.1),
                "refusal_ms_max_per_burst": [round(t * 1000, 1) for t in worst_per_burst],
                # Timed from the start of each connection: the client's own loop opening every
                # socket included (what this bench reported before 2026-12-01, second session).
                "from_connect_ms_p50": round(_p(from_connect, 0.5) * 1000, 1),
                "from_connect_ms_max": round(max(from_connect) * 1000, 1) if from_connect else None,
                "client_floor_ms_max": round(_client_floor(burst, bursts) * 1000, 1),
                # The same refusals as the server's access log times them: from the request's
                # arrival in the app to its answer (without the wait to be read off the socket).
                "server_side_ms_p50": round(_p(inside, 0.5), 2),
                "server_side_ms_max": round(max(inside), 2) if inside else None,
            },
            "rss_mb": {"after_warmup_and_attack": round(rss[0], 1), "after_each_burst": [round(r, 1) for r in rss[1:]],
                       "spread_pct_over_bursts": round((max(rss[1:]) - min(rss[1:])) / min(rss[1:]) * 100, 1)},
        }
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    # Reached only when the run went well: a failed one keeps its folder, the server's log in it.
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--normal", type=int, default=15, help="normal quotes before and after the attack")
    parser.add_argument("--per-client", type=int, default=None,
                        help="GPUCOST_MAX_REQUESTS_PER_CLIENT for the server (0: no per-client limit)")
    parser.add_argument("--set", action="append", default=[], metavar="GPUCOST_NAME=VALUE",
                        help="a setting for the server (repeatable), e.g. --set GPUCOST_MAX_QUOTES=2")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not (1 <= args.burst <= 1000 and 1 <= args.bursts <= 20 and 1 <= args.normal <= 200):
        parser.error("--burst 1-1000, --bursts 1-20, --normal 1-200")
    settings = dict(item.split("=", 1) for item in args.set if "=" in item)
    if len(settings) != len(args.set) or not all(k.startswith("GPUCOST_") for k in settings):
        parser.error("--set takes GPUCOST_NAME=VALUE")
    result = run(args.burst, args.bursts, args.normal, args.per_client, settings)
    if args.json:
        print(json.dumps(result))
        return
    a, b, r = result["attack"], result["burst"], result["rss_mb"]
    print(f"depths attack x6: statuses {a['statuses']} in {a['seconds_for_six']} s; normal quote p50 "
          f"{a['normal_p50_idle_ms']} ms idle -> {a['normal_p50_after_ms']} ms after (x{a['ratio']}), "
          f"5xx {a['normal_5xx']}")
    print(f"{b['requests']} quotes in bursts: {b['statuses']}; 429 latency p50 {b['refusal_ms_p50']} ms, "
          f"p99 {b['refusal_ms_p99']} ms, max {b['refusal_ms_max']} ms, over 100 ms: {b['refusals_over_100ms']}; "
          f"inside the server p50 {b['server_side_ms_p50']} ms, max {b['server_side_ms_max']} ms")
    print(f"  slowest 429 of each burst: {b['refusal_ms_max_per_burst']} ms")
    print(f"  timed from each connection's start: p50 {b['from_connect_ms_p50']} ms, max {b['from_connect_ms_max']} ms; "
          f"this client's floor (a bare server answering 429 at once): max {b['client_floor_ms_max']} ms")
    print(f"RSS (server + workers): {r['after_warmup_and_attack']} MB, after each burst {r['after_each_burst']} "
          f"(spread {r['spread_pct_over_bursts']} %)")


if __name__ == "__main__":
    main()
