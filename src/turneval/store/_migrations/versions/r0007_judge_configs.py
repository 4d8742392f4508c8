"""Judge configurations: what ``turneval optimize`` made from a run's labels, kept beside it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the judge_configs table and its index."""
    op.create_table(
        "judge_configs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.id", ondelete="CASCADE")),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("digest", sa.String(80), nullable=False),
        sa.Column("parent", sa.String(80)),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("report", sa.Text),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_judge_configs_run_id", "judge_configs", ["run_id"])


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_judge_configs_run_id", table_name="judge_configs")
    op.drop_table("judge_configs")
