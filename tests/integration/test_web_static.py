"""The page as served at ``/`` holds to a strict Content-Security-Policy: no inline script, no inline
event handler, no inline style; its policy is in the page itself; every file it references is served.
(That it runs under the policy in a real browser is tests/integration/test_web_browser.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from html.parser import HTMLParser

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.settings import Settings


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline_script = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.inline_script += data.strip()


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("web-static") / "gpucost.sqlite"
    with TestClient(create_app(Settings(db_url=f"sqlite:///{db}"))) as c:
        yield c


def test_the_page_has_no_inline_script_style_or_handler(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    page = _Page()
    page.feed(r.text)
    assert page.inline_script == ""
    for tag, attrs in page.tags:
        assert tag != "style", "an inline <style> element"
        assert "style" not in attrs, f"<{tag}> has a style attribute"
        handlers = [a for a in attrs if a.startswith("on")]
        assert not handlers, f"<{tag}> has inline handlers {handlers}"
        if tag == "script":
            assert attrs.get("src", "").startswith("/static/"), attrs
        if tag == "a" or tag == "link":
            assert not str(attrs.get("href", "")).lower().startswith("javascript:")
    policy = [a.get("content", "") for t, a in page.tags
              if t == "meta" and str(a.get("http-equiv", "")).lower() == "content-security-policy"]
    assert len(policy) == 1
    directives = dict((d.split(" ", 1) + [""])[:2] for d in (p.strip() for p in str(policy[0]).split(";")) if d)
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "unsafe" not in str(policy[0])


def test_every_file_the_page_references_is_served(client: TestClient) -> None:
    page = _Page()
    page.feed(client.get("/").text)
    refs = [a["src"] for t, a in page.tags if t == "script"] + \
        [a["href"] for t, a in page.tags if t == "link" and a.get("rel") == "stylesheet"]
    assert "/static/validate.js" in refs and "/static/app.js" in refs
    refs += [a["href"] for t, a in page.tags if t == "link" and a.get("rel") == "icon"]
    types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    for ref in refs:
        r = client.get(str(ref))
        assert r.status_code == 200, ref
        assert r.headers["content-type"].startswith(types[Path(str(ref)).suffix]), (ref, r.headers["content-type"])
    assert client.get("/static/../pyproject.toml").status_code == 404
