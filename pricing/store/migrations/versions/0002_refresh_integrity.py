"""Refresh integrity: forced snapshots, when a lease was taken, and a record of every refresh run.

``snapshots.forced`` marks a price list accepted with ``force``: the row-collapse guard measures
a provider against its recent history since the last forced list. ``leases.acquired_at`` and
``leases.heartbeat_at`` show in status how long a refresh has run and that it is alive.
``refresh_runs`` keeps each source's attempt from start to finish, so a refresh that died half-way
(killed, out of memory, power cut) is visible afterwards as aborted.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pricing.store.schema import UtcDateTime

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("forced", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("leases") as batch:
        batch.add_column(sa.Column("acquired_at", UtcDateTime(), nullable=True))
        batch.add_column(sa.Column("heartbeat_at", UtcDateTime(), nullable=True))
    op.create_table(
        "refresh_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("started_at", UtcDateTime(), nullable=False),
        sa.Column("finished_at", UtcDateTime(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_refresh_runs"),
    )
    op.create_index("ix_refresh_runs_started_at", "refresh_runs", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_refresh_runs_started_at", table_name="refresh_runs")
    op.drop_table("refresh_runs")
    with op.batch_alter_table("leases") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("acquired_at")
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("forced")
