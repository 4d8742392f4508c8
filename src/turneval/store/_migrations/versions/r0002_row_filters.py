"""Indexes for filtering a run's rows by failure and finding a sample's labels.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the two indexes."""
    op.create_index("ix_rows_run_failed", "rows", ["run_id", "failed", "idx"])
    op.create_index("ix_labels_sample_id", "labels", ["sample_id"])


def downgrade() -> None:
    """Drop them."""
    op.drop_index("ix_labels_sample_id", table_name="labels")
    op.drop_index("ix_rows_run_failed", table_name="rows")
