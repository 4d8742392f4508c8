"""Partial row indexes: only rows with a sample id, and only failed rows, are indexed.

A large run's rows are written faster (most rows fail nothing, and rows of a file without
ids have none); the queries that use them (a sample's labels, a run's failed rows) are the
same.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Replace the two full row indexes by partial ones."""
    op.drop_index("ix_rows_run_failed", table_name="rows")
    op.drop_index("ix_rows_run_sample", table_name="rows")
    op.create_index(
        "ix_rows_run_sample",
        "rows",
        ["run_id", "sample_id"],
        sqlite_where=sa.text("sample_id IS NOT NULL"),
        postgresql_where=sa.text("sample_id IS NOT NULL"),
    )
    op.create_index(
        "ix_rows_failed",
        "rows",
        ["run_id", "idx"],
        sqlite_where=sa.text("failed IS 1"),
        postgresql_where=sa.text("failed IS TRUE"),
    )


def downgrade() -> None:
    """Back to the full indexes of revision 0003."""
    op.drop_index("ix_rows_failed", table_name="rows")
    op.drop_index("ix_rows_run_sample", table_name="rows")
    op.create_index("ix_rows_run_sample", "rows", ["run_id", "sample_id"])
    op.create_index("ix_rows_run_failed", "rows", ["run_id", "failed", "idx"])
