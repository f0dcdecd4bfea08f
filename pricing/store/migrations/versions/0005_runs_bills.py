"""Runs and bills: planned runs (what was quoted), bill files read in, their lines matched to runs,
and the hours and rate factors learnt from them per provider and GPU (issue 25).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pricing.store.schema import UtcDateTime

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "planned_runs",
        sa.Column("run_id", sa.String(128), nullable=False),
        sa.Column("team", sa.String(100), nullable=True),
        sa.Column("job", sa.String(200), nullable=True),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("gpu", sa.String(64), nullable=False),
        sa.Column("quoted_usd", sa.Float(), nullable=False),
        sa.Column("quoted_hours", sa.Float(), nullable=False),
        sa.Column("snapshot_id", sa.String(200), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", name="pk_planned_runs"),
    )
    op.create_index("ix_planned_runs_team", "planned_runs", ["team"])
    op.create_table(
        "bill_imports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("file_sha256", sa.String(64), nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("imported_at", UtcDateTime(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("billed_total", sa.String(40), nullable=False),
        sa.Column("effective_total", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_bill_imports"),
        sa.UniqueConstraint("file_sha256", name="uq_bill_imports_file_sha256"),
    )
    op.create_table(
        "bill_lines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("import_id", sa.Integer(), nullable=False),
        sa.Column("row", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(128), nullable=True),
        sa.Column("matched_by", sa.String(16), nullable=True),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("charge_start", UtcDateTime(), nullable=False),
        sa.Column("charge_end", UtcDateTime(), nullable=False),
        sa.Column("billed", sa.String(40), nullable=False),
        sa.Column("effective", sa.String(40), nullable=False),
        sa.Column("hours", sa.Float(), nullable=False),
        sa.Column("hours_per", sa.String(8), nullable=False),
        sa.Column("resource_id", sa.Text(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("service", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("charge_category", sa.String(64), nullable=False),
        sa.Column("covered", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["import_id"], ["bill_imports.id"], name="fk_bill_lines_import_id_bill_imports",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_bill_lines"),
    )
    op.create_index("ix_bill_lines_import_id", "bill_lines", ["import_id"])
    op.create_index("ix_bill_lines_run_id", "bill_lines", ["run_id"])
    op.create_table(
        "bill_calibration",
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("gpu", sa.String(64), nullable=False),
        sa.Column("hours_factor", sa.Float(), nullable=False),
        sa.Column("rate_factor", sa.Float(), nullable=False),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("provider", "gpu", name="pk_bill_calibration"),
    )


def downgrade() -> None:
    op.drop_table("bill_calibration")
    op.drop_index("ix_bill_lines_run_id", table_name="bill_lines")
    op.drop_index("ix_bill_lines_import_id", table_name="bill_lines")
    op.drop_table("bill_lines")
    op.drop_table("bill_imports")
    op.drop_index("ix_planned_runs_team", table_name="planned_runs")
    op.drop_table("planned_runs")
