"""Choosing a decision endpoint's representation from ``?format=`` and ``Accept``."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from service.api.negotiate import chosen_format

ALL = ("json", "markdown", "png", "svg")


def _request(accept: str | None) -> Request:
    headers = [] if accept is None else [(b"accept", accept.encode())]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers})


@pytest.mark.parametrize(
    ("fmt", "accept", "allowed", "expected"),
    [
        (None, None, ALL, "json"),
        (None, "*/*", ALL, "json"),
        (None, "text/markdown", ALL, "markdown"),
        (None, "text/markdown", ("json",), "json"),  # an endpoint without Markdown keeps JSON
        (None, "image/svg+xml", ALL, "svg"),
        (None, "image/png;q=0.5, image/svg+xml;q=0.8", ALL, "svg"),
        (None, "text/markdown, application/json", ALL, "markdown"),  # equal q: the first listed
        (None, "application/json, text/markdown", ALL, "json"),
        (None, "text/markdown;q=0", ALL, "json"),  # q=0 means "not this"
        (None, "text/markdown;q=bogus", ALL, "json"),
        (None, "text/html,application/xhtml+xml,*/*;q=0.8", ALL, "json"),  # a browser
        ("png", "text/markdown", ALL, "png"),  # the query wins
    ],
)
def test_chosen_format(fmt: str | None, accept: str | None, allowed: tuple[str, ...], expected: str) -> None:
    assert chosen_format(fmt, _request(accept), allowed) == expected
