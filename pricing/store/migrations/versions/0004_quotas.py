"""Account quotas: the limits ``gpucost quotas refresh`` reads (AWS Service Quotas codes in vCPUs,
GCP quota metrics in GPUs), one row per provider, region and code.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pricing.store.schema import UtcDateTime

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quotas",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("region", sa.String(128), nullable=False),
        sa.Column("code", sa.String(128), nullable=False),
        sa.Column("quota_limit", sa.Float(), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_quotas"),
    )
    op.create_index("uq_quotas_provider_region_code", "quotas", ["provider", "region", "code"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_quotas_provider_region_code", table_name="quotas")
    op.drop_table("quotas")
