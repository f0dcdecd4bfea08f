"""The backup and restore commands of docs/deploy.md, run on real stores: what a restored store
serves equals what the original served."""

from __future__ import annotations

import glob
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.integration._pricestore import fresh_pg_database
from tests.integration._replicas import gpucost_command, newest_bundled_autodl, scaled_csv, server_env


def _pg_tool(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    assert found, f"{name} not found (it comes with the PostgreSQL packages infra/postgres-ci.sh installs)"
    return found


def _gpucost(env: dict[str, str], *args: str) -> Any:
    out = subprocess.run([*gpucost_command(), *args], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _served(env: dict[str, str]) -> dict[str, Any]:
    status = _gpucost(env, "prices", "status", "--json")["providers"]
    offers = _gpucost(env, "offers", "--provider", "autodl,gpushare", "--json")["offers"]
    return {
        "status": {p["provider"]: (p["rows"], p.get("snapshot_id"), p["as_of"], p["last_attempt"]) for p in status},
        "offers": sorted(json.dumps(o, sort_keys=True) for o in offers),
    }


def _changed_store(env: dict[str, str], tmp_path: Path) -> None:
    """A store that differs from a fresh one: seeded, then refreshed from a changed AutoDL file."""
    folder = tmp_path / "autodl"
    folder.mkdir(exist_ok=True)
    bundled = newest_bundled_autodl()
    (folder / bundled.name).write_text(scaled_csv(bundled.read_text(), "price_per_gpu_hour", 1.5))
    _gpucost({**env, "GPUCOST_AUTODL_DIR": str(folder)}, "prices", "refresh", "--provider", "autodl", "--json")


@pytest.mark.postgres
def test_pg_dump_and_pg_restore_round_trip_the_store(pg_url: str, tmp_path: Path) -> None:
    dump = tmp_path / "gpucost.dump"
    with fresh_pg_database(pg_url) as source_url, fresh_pg_database(pg_url) as target_url:
        env = server_env(tmp_path, source_url)
        _changed_store(env, tmp_path)
        before = _served(env)
        libpq = make_url(source_url).set(drivername="postgresql").render_as_string(hide_password=False)
        subprocess.run([_pg_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
                        f"--file={dump}", libpq], check=True, timeout=120)
        target = make_url(target_url).set(drivername="postgresql").render_as_string(hide_password=False)
        for extra in ([], ["--clean", "--if-exists"]):  # into an empty database, then over itself
            subprocess.run([_pg_tool("pg_restore"), *extra, "--no-owner", "--no-privileges", "--exit-on-error",
                            "--single-transaction", f"--dbname={target}", str(dump)], check=True, timeout=120)
            assert _served({**env, "GPUCOST_DB_URL": target_url}) == before


def test_sqlite_online_backup_round_trips_the_store(tmp_path: Path) -> None:
    live, copy = tmp_path / "prices.sqlite", tmp_path / "backup.sqlite"
    env = server_env(tmp_path, f"sqlite:///{live}")
    _changed_store(env, tmp_path)
    before = _served(env)
    # docs/deploy.md: python -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).backup(sqlite3.connect(sys.argv[2]))"
    source, target = sqlite3.connect(live), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    assert _served({**env, "GPUCOST_DB_URL": f"sqlite:///{copy}"}) == before
