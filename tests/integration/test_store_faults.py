"""A damaged store is said, not answered from; no filesystem path reaches an anonymous caller;
every HTML answer carries the security headers; leases are judged by the database's clock."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pricing.store import open_store
from service.api.app import create_app
from service.settings import Settings
from tests.integration._pricestore import BACKENDS, backend_url

DECISIONS = {
    "/v1/quote": {"workload": {"model": "gpt2", "tokens": 1e8}},
    "/v1/breakeven": {"workload": {"model": "gpt2", "tokens": 1e8}, "rent": {"gpu": "A100-80GB"},
                      "buy": {"gpu": "RTX4090"}},
    "/v1/plan": {"jobs": [{"name": "a", "workload": {"model": "gpt2", "tokens": 1e7}}]},
    "/v1/frontier": {"workload": {"model": "gpt2", "tokens": 1e8}},
}


def _seeded(path: Path) -> Path:
    store = open_store(f"sqlite:///{path}")
    assert store.all_offers()
    store.close()
    return path


def _delete_half_of_a_current_snapshot(path: Path) -> str:
    """Delete every other offer row of the largest current snapshot; its row_count stays."""
    with sqlite3.connect(path) as conn:
        sid, provider = conn.execute(
            "SELECT id, provider FROM snapshots WHERE is_current ORDER BY row_count DESC LIMIT 1").fetchone()
        ids = [r[0] for r in conn.execute("SELECT rowid FROM offers WHERE snapshot_id = ?", (sid,))]
        conn.executemany("DELETE FROM offers WHERE rowid = ?", [(i,) for i in ids[::2]])
    return str(provider)


def test_decisions_answer_503_with_the_reason_when_half_the_offers_are_gone(tmp_path: Path) -> None:
    path = _seeded(tmp_path / "prices.sqlite")
    with TestClient(create_app(Settings(db_url=f"sqlite:///{path}"))) as c:
        assert c.get("/readyz").status_code == 200
        assert c.post("/v1/quote", json=DECISIONS["/v1/quote"]).status_code == 200  # whole: answered
    provider = _delete_half_of_a_current_snapshot(path)
    with TestClient(create_app(Settings(db_url=f"sqlite:///{path}"))) as c:
        ready = c.get("/readyz")
        assert ready.status_code == 503 and "offers" in ready.json()["reason"]
        for route, body in DECISIONS.items():
            r = c.post(route, json=body)
            assert r.status_code == 503, (route, r.text[:300])
            detail = r.json()["detail"]
            assert "damaged" in detail and "offers" in detail, detail
            assert str(tmp_path) not in detail
        # An estimate reads no prices: it still answers.
        assert c.post("/v1/estimate", json={"workload": {"model": "gpt2"}, "gpu": "A100-80GB"}).status_code == 200
    assert provider


def test_readyz_names_no_filesystem_path(tmp_path: Path) -> None:
    path = tmp_path / "secret-dir" / "prices.sqlite"
    path.parent.mkdir()
    _seeded(path)
    path.write_bytes(b"")  # a 0-byte store: not ready, and the reason used to carry its full path
    with TestClient(create_app(Settings(db_url=f"sqlite:///{path}"))) as c:
        r = c.get("/readyz")
        assert r.status_code == 503
        reason = r.json()["reason"]
        assert "0 bytes" in reason and "prices.sqlite" in reason
        assert str(tmp_path) not in reason and "secret-dir" not in reason
        quote = c.post("/v1/quote", json=DECISIONS["/v1/quote"])
        assert quote.status_code == 503 and "secret-dir" not in quote.text


def test_html_answers_carry_a_strict_policy_and_every_answer_nosniff(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(db_url=f"sqlite:///{tmp_path / 'p.sqlite'}"))) as c:
        page = c.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        directives = {d.split()[0]: d.split()[1:] for d in csp.split("; ")}
        assert directives["script-src"] == ["'self'"] and directives["style-src"] == ["'self'"]
        assert directives["frame-ancestors"] == ["'none'"] and directives["object-src"] == ["'none'"]
        assert "unsafe-inline" not in csp
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        # The policy holds because the page has no inline code for it to block.
        html = page.text.lower()
        assert "<script>" not in html and "<style" not in html and " onclick=" not in html
        for path in ("/healthz", "/v1/gpus", "/static/app.js"):
            r = c.get(path)
            assert r.headers["x-content-type-options"] == "nosniff", path
        refused = c.get("/static/nope.js")
        assert refused.status_code == 404 and refused.headers["x-content-type-options"] == "nosniff"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with backend_url(request, tmp_path, request.param) as url:
        yield url


def test_leases_are_judged_by_the_databases_clock(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = open_store(db_url), open_store(db_url)
    assert a.try_lease("refresh", "replica-a", ttl_s=60)

    class Skewed(datetime):
        """This process's clock two hours fast, as on a replica without NTP."""

        @classmethod
        def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
            return datetime.now(UTC) + timedelta(hours=2)

    import pricing.store.leases as leases

    monkeypatch.setattr(leases, "datetime", Skewed)
    # By its own clock replica B would find A's lease long expired and take it over.
    assert not b.try_lease("refresh", "replica-b", ttl_s=60)
    info = b.lease_info("refresh")
    assert info is not None and info.alive() and b.lease_holder("refresh") == "replica-a"
    a.release_lease("refresh", "replica-a")
    assert b.try_lease("refresh", "replica-b", ttl_s=60)
    a.close()
    b.close()


def test_a_store_damaged_while_serving_is_refused_one_check_later_and_no_request_waits_for_the_check(tmp_path: Path) -> None:
    """Once checked, the store check is redone in the background when its interval is over: the
    request that finds it stale takes the last answer (here: whole), and the requests after the
    check (here: damaged) get 503 with the reason."""
    import time

    path = _seeded(tmp_path / "prices.sqlite")
    with TestClient(create_app(Settings(db_url=f"sqlite:///{path}"))) as c:
        check = c.app.guard_options["store_check"]  # type: ignore[attr-defined]
        assert c.post("/v1/quote", json=DECISIONS["/v1/quote"]).status_code == 200  # checked: whole
        check.ttl_s = 0.05
        _delete_half_of_a_current_snapshot(path)
        time.sleep(0.1)
        stale = c.post("/v1/quote", json=DECISIONS["/v1/quote"])
        assert stale.status_code == 200  # answered from the last check while the next one ran
        deadline = time.monotonic() + 10
        while True:
            r = c.post("/v1/quote", json=DECISIONS["/v1/quote"])
            if r.status_code == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert r.status_code == 503, r.text[:300]
        assert "damaged" in r.json()["detail"] and "offers" in r.json()["detail"]


def test_a_store_check_that_fails_in_the_background_is_logged_and_answers_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    import logging
    import time

    path = _seeded(tmp_path / "prices.sqlite")
    with TestClient(create_app(Settings(db_url=f"sqlite:///{path}"))) as c:
        check = c.app.guard_options["store_check"]  # type: ignore[attr-defined]
        assert c.post("/v1/quote", json=DECISIONS["/v1/quote"]).status_code == 200

        def broken() -> object:
            raise RuntimeError("disk on fire")

        check._store = broken
        check.ttl_s = 0.05
        time.sleep(0.1)
        with caplog.at_level(logging.WARNING, logger="service.api.middleware"):
            for _ in range(20):
                assert c.post("/v1/quote", json=DECISIONS["/v1/quote"]).status_code == 200
                if any("disk on fire" in r.getMessage() for r in caplog.records):
                    break
                time.sleep(0.05)
        assert any("the store check failed: disk on fire" in r.getMessage() for r in caplog.records)
