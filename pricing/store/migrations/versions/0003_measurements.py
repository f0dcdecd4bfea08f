"""Measurements: real training steps of a workload on a device (``gpucost probe``, the training-loop
hooks, imports), kept with their workload, GPU, software and date so every answer can use them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pricing.store.schema import UtcDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "measurements",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("gpu", sa.String(64), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("fits", sa.Boolean(), nullable=False),
        sa.Column("measured_at", UtcDateTime(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_measurements"),
    )
    op.create_index("ix_measurements_gpu", "measurements", ["gpu"])


def downgrade() -> None:
    op.drop_index("ix_measurements_gpu", table_name="measurements")
    op.drop_table("measurements")
