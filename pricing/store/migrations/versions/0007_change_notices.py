"""Change notices on PostgreSQL: every write to a table of the store notifies
``gpucost_store_changed`` when it commits (``pricing.store.change_notices``), so a server can keep
its per-answer reads while nothing changed, as it does on SQLite. A later revision that adds a
table calls ``change_notices.install`` again (``tests/integration/test_change_notices.py`` checks
that every table notifies). Nothing on SQLite.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from pricing.store import change_notices

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        change_notices.install(conn)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        change_notices.uninstall(conn)
