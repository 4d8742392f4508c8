"""The first schema: runs, rows and labels.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the three tables and their indexes."""
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished", sa.DateTime(timezone=True)),
        sa.Column("turneval_version", sa.String(64), nullable=False),
        sa.Column("git_commit", sa.String(64)),
        sa.Column("dataset_path", sa.Text),
        sa.Column("dataset_digest", sa.String(128)),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("judge_model", sa.Text),
        sa.Column("summary", sa.Text),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("out_dir", sa.Text),
        sa.Column("error", sa.Text),
    )
    op.create_index("ix_runs_created", "runs", ["created"])
    op.create_index("ix_runs_out_dir", "runs", ["out_dir"])
    op.create_table(
        "rows",
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("line", sa.Integer),
        sa.Column("sample_id", sa.Text),
        sa.Column("failed", sa.Boolean, nullable=False),
        sa.Column("sample", sa.Text),
        sa.Column("record", sa.Text, nullable=False),
    )
    op.create_index("ix_rows_run_sample", "rows", ["run_id", "sample_id"])
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32)),
        sa.Column("row_index", sa.Integer),
        sa.Column("sample_id", sa.Text),
        sa.Column("metric", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("annotator", sa.Text),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_labels_run_id", "labels", ["run_id"])


def downgrade() -> None:
    """Drop the three tables."""
    op.drop_table("labels")
    op.drop_table("rows")
    op.drop_table("runs")
