"""Commitment prices on offers: reserved, savings-plan, committed-use and capacity-block terms.

``offers.commitments`` holds ``Offer.commitments`` as JSON (a short list per offer, read and
written with the offer); NULL on rows stored before this revision, read back as none.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("offers") as batch:
        batch.add_column(sa.Column("commitments", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("offers") as batch:
        batch.drop_column("commitments")
