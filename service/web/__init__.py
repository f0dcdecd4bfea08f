"""The web page served at ``/``: static HTML, JavaScript and CSS bundled in the package.

Nothing is fetched from a CDN, so the page works wherever the API does (offline, air-gapped).
The page calls the same ``/v1`` endpoints as everyone else; it holds no logic of its own beyond
reading and writing its form to the URL query.
"""

from __future__ import annotations

from importlib import resources

# The files the page is made of, with their media types. Listed, so nothing else is served.
STATIC_FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "validate.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def static_file(name: str) -> bytes:
    """The bytes of one of ``STATIC_FILES`` (KeyError for any other name)."""
    if name not in STATIC_FILES:
        raise KeyError(name)
    return resources.files(__package__).joinpath("static", name).read_bytes()
