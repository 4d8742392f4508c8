"""Dataset versions: contents kept by digest, names with numbered versions, rows with keys.

On this branch it follows 0005 (watch skips); it is meant to follow 0006 (judge configs),
which another branch adds: re-chain ``down_revision`` to "0006" when both are merged.

Revision ID: 0007
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0005"
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
