"""Health that tells the truth: /healthz, /readyz and ``prices status`` on whole and damaged stores."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from pricing.store import open_store
from service.api.app import create_app
from service.cli import app as cli
from service.settings import Settings

runner = CliRunner()


def _seeded(path: Path) -> Path:
    store = open_store(f"sqlite:///{path}")
    assert store.all_offers()
    store.close()  # checkpoints the WAL into the file
    return path


def _drop_offers(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("DROP TABLE offers")


def _lose_aws_rows(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM offers WHERE provider = 'aws'")


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _scribble_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0:16] = b"not a database!!"
    path.write_bytes(bytes(data))


def _scribble_offers_pages(path: Path) -> None:
    """Overwrite the interior of the offers table's b-tree with garbage."""
    with sqlite3.connect(path) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'offers'").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start + 8 : start + page_size] = b"\xa5" * (page_size - 8)
    path.write_bytes(bytes(data))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "dropped offers table": (_drop_offers, "offers"),
    "lost rows of one provider": (_lose_aws_rows, "offers"),
    "0-byte file": (_truncate, "0 bytes"),
    "scribbled header": (_scribble_header, "not a database"),
    "scribbled offers pages": (_scribble_offers_pages, "offers"),
}


def test_healthz_and_readyz_on_a_whole_store(tmp_path: Path) -> None:
    path = _seeded(tmp_path / "prices.sqlite")
    with TestClient(create_app(Settings(db_url=f"sqlite:///{path}"))) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        r = c.get("/readyz")
        assert r.status_code == 200 and r.json() == {"status": "ready"}
    result = runner.invoke(cli, ["prices", "status", "--json"], env={"GPUCOST_DB_URL": f"sqlite:///{path}"})
    assert result.exit_code == 0, result.output
    assert '"problems":[]' in result.stdout


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_store_is_not_ready_and_status_names_the_table(tmp_path: Path, kind: str) -> None:
    damage, named = DAMAGE[kind]
    path = _seeded(tmp_path / "prices.sqlite")
    damage(path)
    url = f"sqlite:///{path}"
    with TestClient(create_app(Settings(db_url=url))) as c:
        assert c.get("/healthz").status_code == 200  # the process lives
        r = c.get("/readyz")
        assert r.status_code == 503, r.text
        reason = r.json()["reason"]
        assert named in reason
        quote = c.post("/v1/quote", json={"workload": {"model": "gpt2"}})
        assert quote.status_code in (200, 503)
        for text in (reason, quote.text):
            # Plain words: no SQL echo, no SQLAlchemy links or class names.
            assert "sqlalche" not in text.lower() and "[SQL:" not in text and "Traceback" not in text
    result = runner.invoke(cli, ["prices", "status"], env={"GPUCOST_DB_URL": url})
    assert result.exit_code != 0
    assert named in result.output
    assert "Traceback" not in result.output
    if kind == "0-byte file":
        assert path.stat().st_size == 0  # said, not silently re-seeded


def test_readiness_needs_prices(tmp_path: Path) -> None:
    from pricing.snapshot.loader import load_bundled

    def nothing() -> object:
        return dataclasses.replace(load_bundled(), offers=[], builds=[])

    store = open_store(f"sqlite:///{tmp_path / 'p.sqlite'}", seed=nothing)  # type: ignore[arg-type]
    app = create_app(Settings(db_url=f"sqlite:///{tmp_path / 'p.sqlite'}"))
    app.state.store = store
    with TestClient(app) as c:
        r = c.get("/readyz")
    assert r.status_code == 503 and "no prices" in r.json()["reason"]
