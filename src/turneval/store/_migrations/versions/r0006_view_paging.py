"""The viewer's paging: each ended run's row count kept, and labels found by run, metric, row.

Listing runs read every row of every run to count them (about 0.1 s a run of 200,000 rows);
an ended run now keeps its count (``runs.row_count``, NULL while rows are added). The
labeling page found a row's label among all the run's labels (1.4 s a keystroke with 100,000
labels); an index on ``(run_id, metric, row_index)`` finds it at once.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the count (filled for the runs that ended) and the labels' index."""
    op.add_column("runs", sa.Column("row_count", sa.Integer))
    op.execute(
        "UPDATE runs SET row_count = (SELECT count(*) FROM rows WHERE rows.run_id = runs.id) "
        "WHERE status <> 'running'"
    )
    op.create_index("ix_labels_run_metric_row", "labels", ["run_id", "metric", "row_index"])


def downgrade() -> None:
    """Back to revision 0004."""
    op.drop_index("ix_labels_run_metric_row", table_name="labels")
    with op.batch_alter_table("runs") as batch:  # SQLite drops a column through a copy
        batch.drop_column("row_count")
