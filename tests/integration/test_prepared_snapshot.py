"""A CLI quote on a snapshot prepared by an earlier command (``service.prepared``): the same answer
as the full way, read without SQLAlchemy, never from the file of other prices, and a damaged file
costs time, not answers."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pricing.price_view import price_view
from pricing.store.peek import peek_sqlite, snapshot_key, sqlite_path
from pricing.store.repository import open_store
from service.prepared import Prepared, file_of, folder_of

QUOTE = ["quote", "--model", "qwen2.5-0.5b", "--method", "lora", "--tokens", "1e7", "--json"]
# The command's answer, and on stderr which ORM-side modules the process had imported by its end.
RUN = ("import atexit, sys\n"
       "atexit.register(lambda: sys.stderr.write('\\nLOADED ' + ','.join(m for m in ('sqlalchemy', 'alembic')"
       " if m in sys.modules) + '\\n'))\n"
       "from service.cli import main\nmain()\n")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "GPUCOST_DB_URL": f"sqlite:///{tmp_path / 'g.sqlite'}", "XDG_DATA_HOME": str(tmp_path),
            "GPUCOST_ANSWER_CACHE": "false", "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "true", **extra}


def _quote(env: dict[str, str], *args: str) -> tuple[dict[str, Any], list[str]]:
    done = subprocess.run([sys.executable, "-c", RUN, *(args or QUOTE)], env=env, capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = done.stderr.rsplit("LOADED ", 1)[1].split()
    return json.loads(done.stdout), loaded[0].split(",") if loaded else []


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # The solver's own seconds differ from run to run; everything else must not.
    strip = [{**q, "solver": {k: v for k, v in q["solver"].items() if k != "seconds"}} for q in (a, b)]
    return strip[0] == strip[1]


def _prepared_files(db: Path) -> list[Path]:
    """The snapshot files a quote reads first (the views naming regions have a file of their own)."""
    return sorted(p for p in folder_of(db).glob("*.pickle") if not p.name.endswith(".regions.pickle"))


def _regions_files(db: Path) -> list[Path]:
    return sorted(folder_of(db).glob("*.regions.pickle"))


def test_second_quote_answers_from_the_prepared_snapshot_without_the_orm(tmp_path: Path) -> None:
    env = _env(tmp_path)
    db = tmp_path / "g.sqlite"
    first, first_loaded = _quote(env)
    assert "sqlalchemy" in first_loaded  # created, migrated and seeded the full way
    (prepared,) = _prepared_files(db)
    second, second_loaded = _quote(env)
    assert second_loaded == []  # neither SQLAlchemy nor Alembic
    assert _same(first, second)
    assert second["snapshot_id"] == first["snapshot_id"]
    assert second["estimate"]["offers_total"] == first["estimate"]["offers_total"] > 1000
    assert second["estimate"]["offers_considered"] == first["estimate"]["offers_considered"]
    assert _prepared_files(db) == [prepared]  # read, not rewritten
    # Other constraints read other views of the same prepared index: regions, spot, providers.
    for extra in (["--region", "us-east-1,us-central1"], ["--spot"], ["--provider", "aws,lambda", "--no-local"]):
        os.replace(prepared, tmp_path / "aside.pickle")  # the full way first
        full, loaded = _quote(env, *QUOTE, *extra)
        assert "sqlalchemy" in loaded
        fast, loaded = _quote(env, *QUOTE, *extra)
        assert loaded == []
        assert _same(full, fast), extra
    # A quote naming regions reads their file; without it, the store's offers of the same snapshot.
    region = ["--region", "us-east-1,us-central1"]
    (regions,) = _regions_files(db)
    with_file, _ = _quote(env, *QUOTE, *region)
    regions.unlink()
    without, loaded = _quote(env, *QUOTE, *region)
    assert "sqlalchemy" in loaded and _same(with_file, without)


def test_new_prices_are_never_answered_from_an_older_prepared_snapshot(tmp_path: Path) -> None:
    env = _env(tmp_path)
    url = env["GPUCOST_DB_URL"]
    before, _ = _quote(env)
    best = before["best"]
    assert best["kind"] == "cloud"
    store = open_store(url)
    rows = [o for o in store.all_offers() if o.provider == best["provider"]]
    # The chosen provider halves every price: a new current snapshot, a new snapshot id.
    cheaper = [o.model_copy(update={"price_hour": o.price_hour / 2 if o.price_hour else o.price_hour}) for o in rows]
    store.replace_rows(best["provider"], cheaper, fetched_at=datetime.now(UTC), source="test: halved")
    store.price_view = price_view()  # the CLI's view: bundled rates, no price book
    sid = store.snapshot_id()
    store.close()
    after, loaded = _quote(env)
    assert "sqlalchemy" in loaded  # no file for the new snapshot yet: the full way
    assert after["snapshot_id"] == sid != before["snapshot_id"]
    assert after["best"]["cost_usd"] < best["cost_usd"]
    again, loaded = _quote(env)
    assert loaded == [] and _same(after, again)
    # A price book changes the prices a user sees, so it changes the id as well.
    book = tmp_path / "book.yaml"
    book.write_text(f"name: team\ndiscounts: {{{best['provider']}: 0.5}}\n")
    booked_env = _env(tmp_path, GPUCOST_PRICE_BOOK=str(book))
    booked, loaded = _quote(booked_env)
    assert "sqlalchemy" in loaded and booked["snapshot_id"] not in (sid, before["snapshot_id"])
    # The same book file (no as_of in it) gives the same id in the next process: prepared again.
    booked_again, loaded = _quote(booked_env)
    assert loaded == [] and _same(booked, booked_again)


def test_a_damaged_prepared_file_is_ignored_and_written_again(tmp_path: Path) -> None:
    env = _env(tmp_path)
    db = tmp_path / "g.sqlite"
    good, _ = _quote(env)
    (prepared,) = _prepared_files(db)
    prepared.write_bytes(b"not a pickle")
    answer, loaded = _quote(env)
    assert "sqlalchemy" in loaded and _same(good, answer)
    assert isinstance(pickle.loads(prepared.read_bytes()), Prepared)
    answer, loaded = _quote(env)
    assert loaded == [] and _same(good, answer)


def test_a_prepared_folder_that_cannot_be_written_costs_time_not_answers(tmp_path: Path) -> None:
    env = _env(tmp_path)
    db = tmp_path / "g.sqlite"
    good, _ = _quote(env)
    shutil.rmtree(folder_of(db))
    folder_of(db).write_text("a file where the folder would go")  # mkdir fails, even for root
    for _ in range(2):
        answer, loaded = _quote(env)
        assert _same(good, answer) and "sqlalchemy" in loaded


def test_peek_agrees_with_the_store_and_declines_what_it_cannot_be_sure_of(tmp_path: Path) -> None:
    db = tmp_path / "p.sqlite"
    url = f"sqlite:///{db}"
    assert peek_sqlite(db) is None  # no file
    db.write_bytes(b"")
    assert peek_sqlite(db) is None  # empty
    db.unlink()
    store = open_store(url)
    assert peek_sqlite(db) is None  # migrated, not yet seeded
    sid = store.snapshot_id()  # the first read seeds it
    currents = peek_sqlite(db)
    assert currents is not None and [(c.provider, c.id, c.as_of) for c in currents] == [
        (c.provider, c.id, c.as_of) for c in store._currents()]
    assert all(c.as_of.tzinfo is not None for c in currents)
    assert snapshot_key(currents, None) == sid
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'older'")
    assert peek_sqlite(db) is None  # not at the head this code migrates to
    store.close()
    assert file_of(db, sid).parent == tmp_path / "p.sqlite.prepared"


@pytest.mark.parametrize(("url", "path"), [
    ("sqlite:////abs/p.sqlite", Path("/abs/p.sqlite")),
    ("sqlite:///rel/p.sqlite", Path("rel/p.sqlite")),
    ("sqlite+pysqlite:////abs/p.sqlite", Path("/abs/p.sqlite")),
    ("sqlite://", None),
    ("sqlite:///:memory:", None),
    ("sqlite:////abs/p.sqlite?mode=ro", None),
    ("sqlite:////abs/with%20space.sqlite", None),
    ("postgresql+psycopg://u:p@localhost/gpucost", None),
])
def test_sqlite_path_reads_only_plain_sqlite_urls(url: str, path: Path | None) -> None:
    assert sqlite_path(url) == path
