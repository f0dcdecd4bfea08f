"""JSON over HTTPS for the adapters of providers with plain REST/GraphQL price APIs (Azure, Lambda,
RunPod, Vast), with errors translated where they enter: 429, 5xx and timeouts are retriable
``ProviderError``s, 401/403 are ``MissingCredentials`` (the source is skipped, and says why), any
other status or a body that is not JSON is a plain failure.

Standard library only (``urllib``): a price fetch needs nothing more, and the service keeps no HTTP
client dependency for it. Every endpoint is overridable (settings or ``GPUCOST_*_URL``), which is
how the tests serve documented responses on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from pricing.errors import ProviderError
from pricing.source import SourceSettings

DEFAULT_TIMEOUT_S = 60.0
# Untrusted bodies are bounded before parsing: the largest documented page (Azure, 1,000 items)
# is a few MB.
MAX_BODY_BYTES = 64 * 1024 * 1024
USER_AGENT = "gpucost-price-refresh"


def setting(settings: SourceSettings, key: str, env: str, default: str | None = None) -> str | None:
    """``settings.extra[key]``, else the environment variable ``env``, else ``default``."""
    value = settings.extra.get(key)
    if value:
        return str(value)
    return os.environ.get(env) or default


def request_json(
    provider: str,
    url: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Any:
    """GET (or POST ``body`` as JSON) and decode the JSON answer."""
    if params:
        url = f"{url}{'&' if '?' in url else '?'}{urllib.parse.urlencode(params)}"
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    req.add_header("Accept", "application/json")
    req.add_header("User-Agent", USER_AGENT)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - https or loopback
            raw = resp.read(MAX_BODY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        exc.close()  # the error carries the open response; its socket is not needed
        if exc.code in (401, 403):
            # A key that was given and refused is a failure to fix, not a source to skip quietly.
            raise ProviderError(provider, f"HTTP {exc.code} from {_host(url)}: the API key was refused") from exc
        retriable = exc.code == 429 or exc.code >= 500
        raise ProviderError(provider, f"HTTP {exc.code} from {_host(url)}", retriable) from exc
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProviderError(provider, f"cannot reach {_host(url)}: {reason}", retriable=True) from exc
    if len(raw) > MAX_BODY_BYTES:
        raise ProviderError(provider, f"answer from {_host(url)} is larger than {MAX_BODY_BYTES} bytes")
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProviderError(provider, f"answer from {_host(url)} is not JSON") from exc


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url
