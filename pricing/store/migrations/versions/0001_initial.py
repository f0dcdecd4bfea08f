"""Initial price store: snapshots, offers, local builds, provider status, leases, store meta.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pricing.store.schema import UtcDateTime

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("fetched_at", UtcDateTime(), nullable=False),
        sa.Column("as_of", UtcDateTime(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("row_count", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_snapshots"),
    )
    op.create_index("ix_snapshots_provider_fetched_at", "snapshots", ["provider", "fetched_at"])
    op.create_index(
        "uq_snapshots_current_provider",
        "snapshots",
        ["provider"],
        unique=True,
        sqlite_where=sa.text("is_current"),
        postgresql_where=sa.text("is_current"),
    )

    op.create_table(
        "offers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("region", sa.String(128), nullable=False),
        sa.Column("zone", sa.String(128), nullable=True),
        sa.Column("instance_type", sa.String(200), nullable=False),
        sa.Column("gpu", sa.String(64), nullable=False),
        sa.Column("gpu_count", sa.Float(), nullable=False),
        sa.Column("gpu_vram_gb", sa.Float(), nullable=False),
        sa.Column("vcpus", sa.Float(), nullable=True),
        sa.Column("ram_gb", sa.Float(), nullable=True),
        sa.Column("price_hour", sa.Float(), nullable=True),
        sa.Column("spot_price_hour", sa.Float(), nullable=True),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("price_hour_native", sa.Float(), nullable=True),
        sa.Column("spot_price_hour_native", sa.Float(), nullable=True),
        sa.Column("billing_increment_s", sa.Integer(), nullable=False),
        sa.Column("min_billing_s", sa.Integer(), nullable=False),
        sa.Column("interconnect", sa.String(32), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("as_of", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"], ["snapshots.id"], name="fk_offers_snapshot_id_snapshots", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_offers"),
    )
    op.create_index("ix_offers_snapshot_id", "offers", ["snapshot_id"])
    op.create_index("ix_offers_instance_type", "offers", ["instance_type"])

    op.create_table(
        "local_builds",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("build_id", sa.String(200), nullable=False),
        sa.Column("gpu", sa.String(64), nullable=False),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.Column("price_usd", sa.Float(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("as_of", UtcDateTime(), nullable=False),
        sa.Column("attrs", sa.JSON(), nullable=False),
        sa.Column("parts", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name="fk_local_builds_snapshot_id_snapshots",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_local_builds"),
    )
    op.create_index("ix_local_builds_snapshot_id", "local_builds", ["snapshot_id"])

    op.create_table(
        "provider_status",
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("last_attempt", UtcDateTime(), nullable=True),
        sa.Column("last_success", UtcDateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("provider", name="pk_provider_status"),
    )
    op.create_table(
        "leases",
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("holder", sa.String(200), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )
    op.create_table(
        "store_meta",
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("value", sa.String(500), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_store_meta"),
    )


def downgrade() -> None:
    op.drop_table("store_meta")
    op.drop_table("leases")
    op.drop_table("provider_status")
    op.drop_index("ix_local_builds_snapshot_id", table_name="local_builds")
    op.drop_table("local_builds")
    op.drop_index("ix_offers_instance_type", table_name="offers")
    op.drop_index("ix_offers_snapshot_id", table_name="offers")
    op.drop_table("offers")
    op.drop_index("uq_snapshots_current_provider", table_name="snapshots")
    op.drop_index("ix_snapshots_provider_fetched_at", table_name="snapshots")
    op.drop_table("snapshots")
