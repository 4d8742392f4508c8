"""Dataset versions: contents kept by digest, names with numbered versions, rows with keys.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the datasets, dataset_versions and dataset_rows tables."""
    op.create_table(
        "datasets",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("rows", sa.Integer, nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "dataset_versions",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("digest", sa.String(64), sa.ForeignKey("datasets.digest"), nullable=False),
        sa.Column("path", sa.Text),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_dataset_versions_digest", "dataset_versions", ["digest"])
    op.create_table(
        "dataset_rows",
        sa.Column(
            "digest",
            sa.String(64),
            sa.ForeignKey("datasets.digest", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("row_digest", sa.String(64), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("dataset_rows")
    op.drop_index("ix_dataset_versions_digest", table_name="dataset_versions")
    op.drop_table("dataset_versions")
    op.drop_table("datasets")
