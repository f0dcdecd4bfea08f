"""Headers every response carries, and those an HTML page needs on top.

The page (``service/web/static/index.html``) loads its scripts and styles from ``/static/`` and
has no inline script, style or event handler, so its policy can forbid all inline code: markup
that reaches the page through a job name or a shared link cannot run. ``frame-ancestors 'none'``
and ``X-Frame-Options: DENY`` keep the page out of other sites' frames (click-jacking); ``nosniff``
keeps a browser from reading a JSON answer as HTML or script.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# FastAPI's /docs and /redoc pages are built from an inline script and a CDN's bundle: they get
# the same framing and sniffing rules, and a policy that lets exactly that run.
DOCS_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly; font-src https://fonts.gstatic.com; "
    "worker-src blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
DOCS_PATHS = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})

ALWAYS = [(b"x-content-type-options", b"nosniff")]
HTML = [(b"x-frame-options", b"DENY"), (b"referrer-policy", b"no-referrer")]


def with_security_headers(message: MutableMapping[str, Any], path: str) -> list[tuple[bytes, bytes]]:
    """The response-start message's headers with the security headers added."""
    headers = list(message.get("headers", ()))
    names = {bytes(k).lower() for k, _ in headers}
    extra = list(ALWAYS)
    content_type = next((bytes(v) for k, v in headers if bytes(k).lower() == b"content-type"), b"")
    if content_type.startswith(b"text/html"):
        policy = DOCS_POLICY if path in DOCS_PATHS else CONTENT_SECURITY_POLICY
        extra += [*HTML, (b"content-security-policy", policy.encode())]
    return headers + [(k, v) for k, v in extra if k not in names]
