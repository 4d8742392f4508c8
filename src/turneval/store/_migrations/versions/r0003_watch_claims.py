"""Claims: several ``turneval watch`` processes sharing a store score each conversation once.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the claims table."""
    op.create_table(
        "claims",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("owner", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32)),
        sa.Column("claimed", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table("claims")
