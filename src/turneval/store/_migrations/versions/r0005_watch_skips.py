"""Watch skips: the conversations a ``turneval watch`` run did not score, and why.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the watch_skips table and its index."""
    op.create_table(
        "watch_skips",
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("conversation", sa.Text, primary_key=True),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("trace_ids", sa.Text, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_watch_skips_run_created", "watch_skips", ["run_id", "created"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_watch_skips_run_created", table_name="watch_skips")
    op.drop_table("watch_skips")
