"""A tiny HTTP server on 127.0.0.1 that answers as Azure Retail Prices, Lambda, RunPod and Vast
document their APIs, from the ``*_built.json`` files in tests/data/api. It checks what a real API
would check (the filter, the API key) and records each request; ``fail`` makes a path answer 500."""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

API = Path(__file__).parents[1] / "data" / "api"
LAMBDA_KEY = "lambda-test-key"
RUNPOD_KEY = "runpod-test-key"


def _load(name: str) -> dict[str, Any]:
    return json.loads((API / name).read_text())


@dataclass
class FakeApis:
    base: str
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        return {
            "GPUCOST_AZURE_PRICES_URL": f"{self.base}/azure/prices",
            "GPUCOST_AZURE_REGIONS": "eastus",
            "GPUCOST_LAMBDA_API_URL": f"{self.base}/lambda/instance-types",
            "GPUCOST_RUNPOD_API_URL": f"{self.base}/runpod/graphql",
            "GPUCOST_VAST_API_URL": f"{self.base}/vast/bundles/",
        }


def _handler(state: FakeApis) -> type[BaseHTTPRequestHandler]:
    azure = _load("azure_retail_prices_eastus_built.json")
    lam = _load("lambda_instance_types_built.json")["response"]
    runpod = _load("runpod_gpu_types_built.json")["response"]
    vast = _load("vast_bundles_built.json")["response"]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            return None

        def _send(self, code: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _route(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            state.requests.append((method, url.path, query))
            if url.path in state.fail:
                return self._send(state.fail[url.path], {"error": "injected"})
            auth = self.headers.get("Authorization", "")
            if method == "GET" and url.path == "/azure/prices":
                flt = query.get("$filter", "")
                if query.get("api-version") != "2023-01-01-preview" or "serviceName eq 'Virtual Machines'" not in flt:
                    return self._send(400, {"Error": "bad filter"})
                if "priceType eq 'Reservation'" in flt:
                    return self._send(200, azure["reservation_pages"][0])
                first = dict(azure["consumption_pages"][0])
                first["NextPageLink"] = f"{state.base}/azure/prices/next?page=2"
                return self._send(200, first)
            if method == "GET" and url.path == "/azure/prices/next":
                return self._send(200, azure["consumption_pages"][1])
            if method == "GET" and url.path == "/lambda/instance-types":
                if auth != f"Bearer {LAMBDA_KEY}":
                    return self._send(401, {"error": {"code": "global/invalid-api-key"}})
                return self._send(200, lam)
            if method == "POST" and url.path == "/runpod/graphql":
                if query.get("api_key") != RUNPOD_KEY:
                    return self._send(401, {"errors": [{"message": "Unauthorized"}]})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if "gpuTypes" not in body.get("query", ""):
                    return self._send(400, {"errors": [{"message": "no query"}]})
                return self._send(200, runpod)
            if method == "POST" and url.path == "/vast/bundles/":
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                if body.get("rentable") != {"eq": True}:
                    return self._send(400, {"error": "bad query"})
                return self._send(200, vast)
            return self._send(404, {"error": "not found"})

        def do_GET(self) -> None:  # noqa: N802
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

    return Handler


@contextmanager
def provider_apis() -> Iterator[FakeApis]:
    state = FakeApis(base="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="fake-provider-apis", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
