"""Is the store whole? Which table is damaged, in words an operator can act on.

``problems()`` reads every table (its columns, its b-tree end to end), asks SQLite for its own
quick check, and compares each current snapshot's recorded row count with the rows it holds. It
returns plain sentences naming the table, never a driver's traceback; an empty list means
healthy. Mixed into ``PriceStore``.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.exc import SQLAlchemyError

from pricing.store.rows import _builds, _offers, _snap
from pricing.store.schema import Base

# SQLite's quick_check names b-trees by root page ("Tree 7 page 12 ..." / "Page 12: ...").
_TREE = re.compile(r"\b(?:Tree|tree)\s+(\d+)")


def plain_error(exc: BaseException) -> str:
    """The database's own message, without SQLAlchemy's SQL echo, parameters and links."""
    orig = getattr(exc, "orig", None)
    message = str(orig if orig is not None else exc)
    message = message.split("\n[SQL:")[0].split("\n(Background on this error")[0]
    return " ".join(message.split()) or type(exc).__name__


class Health:
    """Damage checks of ``PriceStore``."""

    def problems(self) -> list[str]:
        found: list[str] = []
        try:
            with self.engine.connect() as conn:
                for table in Base.metadata.sorted_tables:
                    problem = _table_problem(conn, table)
                    if problem:
                        found.append(f"table {table.name}: {problem}")
                if conn.dialect.name == "sqlite":
                    found.extend(_sqlite_quick_check(conn))
                if not found:
                    found.extend(_count_mismatches(conn))
        except SQLAlchemyError as exc:
            found.append(f"the price store cannot be read: {plain_error(exc)}")
        return found

    def has_prices(self) -> bool:
        """Whether any provider has a current price list with rows."""
        with self._read() as conn:
            return bool(conn.execute(
                select(func.count()).select_from(_snap).where(_snap.c.is_current, _snap.c.row_count > 0)
            ).scalar_one())


def _table_problem(conn: Any, table: Any) -> str | None:
    try:
        # Every column once (a missing or renamed one fails here), then the whole b-tree.
        conn.execute(select(*table.c).limit(1)).all()
        conn.execute(select(func.count()).select_from(table)).scalar_one()
    except SQLAlchemyError as exc:
        conn.rollback()
        return f"unreadable ({plain_error(exc)})"
    except (ValueError, TypeError) as exc:  # a stored value our column types cannot decode
        conn.rollback()
        return f"holds a value that cannot be read ({exc})"
    return None


def _sqlite_quick_check(conn: Any) -> list[str]:
    try:
        lines = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check(20)")]
    except SQLAlchemyError as exc:
        conn.rollback()
        return [f"the database file fails SQLite's quick check: {plain_error(exc)}"]
    if lines == ["ok"]:
        return []
    roots = {
        int(r.rootpage): (r.type, r.name, r.tbl_name)
        for r in conn.execute(text("SELECT type, name, tbl_name, rootpage FROM sqlite_master"))
        if r.rootpage
    }
    out: list[str] = []
    for line in lines:
        match = _TREE.search(line)
        owner = roots.get(int(match.group(1))) if match else None
        if owner and owner[0] == "table":
            out.append(f"table {owner[1]}: damaged ({line})")
        elif owner:
            out.append(f"table {owner[2]}: its index {owner[1]} is damaged ({line})")
        else:
            out.append(f"database file: {line}")
    return out


def _count_mismatches(conn: Any) -> list[str]:
    """A current snapshot must hold as many rows as it says: fewer means rows were lost."""
    out = []
    for table, label in ((_offers, "offers"), (_builds, "local_builds")):
        held = dict(
            conn.execute(
                select(table.c.snapshot_id, func.count()).group_by(table.c.snapshot_id)
            ).all()
        )
        for snap in conn.execute(
            select(_snap.c.id, _snap.c.provider, _snap.c.row_count).where(_snap.c.is_current)
        ):
            if (label == "local_builds") != (snap.provider == "local"):
                continue
            have = int(held.get(snap.id, 0))
            if have != int(snap.row_count):
                out.append(
                    f"table {label}: the current {snap.provider} price list (snapshot {snap.id}) "
                    f"holds {have} of its {snap.row_count} rows"
                )
    return out
