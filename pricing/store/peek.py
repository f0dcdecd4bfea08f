"""What the price store is, read without SQLAlchemy: where the default store lives, the head
revision of its migrations, and, for an SQLite store, which snapshots are current.

A CLI command that only reads prices needs no more than that to find its answer's inputs in a
file prepared per snapshot (``service.prepared``); importing SQLAlchemy and the schema costs
more than the rest of such a command. Anything this module is not sure of (another back end, a
store not yet created, migrated or seeded, a locked or damaged file) is answered with ``None``,
and the caller opens the store the full way, which creates, migrates, seeds or reports.
"""

from __future__ import annotations

import ast
import hashlib
import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DEFAULT_DB_FILE = "prices.sqlite"
SEED_MARKER = "bundled_snapshot_loaded"

_REVISION_LINE = re.compile(r"^(revision|down_revision|branch_labels|depends_on)\b[^=]*=\s*(.+?)\s*$", re.MULTILINE)
_SQLITE_PREFIXES = ("sqlite:///", "sqlite+pysqlite:///")


@dataclass(frozen=True)
class Current:
    """The current snapshot of one provider, as the version check reads it."""

    id: int
    provider: str
    content_hash: str
    as_of: datetime
    row_count: int


def default_db_url() -> str:
    import platformdirs

    folder = Path(platformdirs.user_data_dir("gpucost"))
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / DEFAULT_DB_FILE}"


def script_head() -> str | None:
    """The head revision of the migration scripts, read from their text, or None when the
    scripts are not a plain chain this reading is sure of (branches, merges, dependencies):
    importing Alembic to find out costs more than a CLI command's whole answer."""
    revisions: dict[str, str | None] = {}
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        fields = dict(_REVISION_LINE.findall(script.read_text(encoding="utf-8")))
        try:
            values = {k: ast.literal_eval(v) for k, v in fields.items()}
        except (ValueError, SyntaxError):
            return None
        rev, down = values.get("revision"), values.get("down_revision")
        if (not isinstance(rev, str) or rev in revisions or not isinstance(down, str | None)
                or values.get("branch_labels") or values.get("depends_on")):
            return None
        revisions[rev] = down
    heads = set(revisions) - {d for d in revisions.values() if d is not None}
    return heads.pop() if len(heads) == 1 else None


def snapshot_key(currents: Iterable[Current], view_fingerprint: str | None) -> str:
    """Stable id of a set of current snapshots under a price view: equal content, equal id."""
    digest = hashlib.sha256()
    for c in currents:
        digest.update(f"{c.provider}:{c.content_hash}\n".encode())
    if view_fingerprint is not None:
        digest.update(f"view:{view_fingerprint}\n".encode())
    return digest.hexdigest()[:16]


def sqlite_path(url: str) -> Path | None:
    """The file of a plain ``sqlite:///<path>`` URL; None for anything else (other back ends,
    in-memory databases, URLs with options or escapes this reading would have to interpret)."""
    prefix = next((p for p in _SQLITE_PREFIXES if url.startswith(p)), None)
    if prefix is None:
        return None
    rest = url[len(prefix):]
    if not rest or rest == ":memory:" or "?" in rest or "%" in rest:
        return None
    return Path(rest)


def read_only_rows(path: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of one query on the SQLite store at ``path``, opened read-only; none when the file is
    missing or empty, or the table is not there (a store from before the migration that adds it).
    The CLI's quick paths read measurements, quotas and calibration this way, without SQLAlchemy."""
    if not path.is_file() or path.stat().st_size == 0:
        return []
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return []
    try:
        return [tuple(r) for r in conn.execute(sql, tuple(params)).fetchall()]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


# The current snapshots, by provider: plain SQL that SQLite and PostgreSQL both run as written.
CURRENT_SQL = ("SELECT id, provider, content_hash, as_of, row_count FROM snapshots "
               "WHERE is_current ORDER BY provider")


def utc_datetime(value: object) -> datetime:
    """A stored time as an aware UTC datetime: SQLite keeps ISO text without an offset, in UTC
    (``schema.UtcDateTime``); PostgreSQL's driver hands back aware datetimes."""
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def currents_from(rows: Iterable[Sequence[Any]]) -> list[Current]:
    return [Current(int(i), str(p), str(h), utc_datetime(a), int(n)) for i, p, h, a, n in rows]


def peek_sqlite(path: Path) -> list[Current] | None:
    """The current snapshots of the SQLite store at ``path``, by provider, if the store is at the
    migrations' head and has been seeded; otherwise None."""
    head = script_head()
    if head is None or not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error:
        return None
    try:
        if conn.execute("SELECT version_num FROM alembic_version").fetchall() != [(head,)]:
            return None
        if conn.execute("SELECT 1 FROM store_meta WHERE key = ?", (SEED_MARKER,)).fetchone() is None:
            return None
        return currents_from(conn.execute(CURRENT_SQL).fetchall())
    except (sqlite3.Error, ValueError):
        return None
    finally:
        conn.close()
