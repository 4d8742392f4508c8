"""The store's tables (SQLAlchemy Core): runs, rows, labels, watch claims, skips, judges, datasets.

The migrations in ``_migrations/versions`` create exactly these; a change here needs a new
migration (and the store's schema revision moves with it).
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

__all__ = [
    "claims",
    "dataset_rows",
    "dataset_versions",
    "datasets",
    "judge_configs",
    "labels",
    "metadata",
    "rows",
    "runs",
    "watch_skips",
]

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", Text, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False, index=True),
    Column("finished", DateTime(timezone=True)),
    Column("turneval_version", String(64), nullable=False),
    Column("git_commit", String(64)),
    Column("dataset_path", Text),
    Column("dataset_digest", String(128)),
    Column("metrics", Text, nullable=False),  # JSON: [{"name", "class", "config"}]
    Column("judge_model", Text),
    Column("summary", Text),  # JSON: the run's summary.json document
    Column("status", String(16), nullable=False),  # running | finished | failed | interrupted
    Column("out_dir", Text, index=True),  # the run folder a streamed run writes (resume)
    Column("error", Text),  # why it failed or stopped
    # revision 0006: the rows an ended run holds, counted when it ended (NULL while rows are
    # added), so listing runs never counts a large run's rows again
    Column("row_count", Integer),
)

rows = Table(
    "rows",
    metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("idx", Integer, primary_key=True, autoincrement=False),
    Column("line", Integer),
    Column("sample_id", Text),
    Column("failed", Boolean, nullable=False),
    Column("sample", Text),  # JSON: the sample, when the run had it
    Column("record", Text, nullable=False),  # JSON: the results.jsonl row, as written there
    # Partial indexes (revision 0004): a row without a sample id, or one that did not fail,
    # costs its insert no index entry (most rows of a large run are both).
    Index(
        "ix_rows_run_sample",
        "run_id",
        "sample_id",
        sqlite_where=text("sample_id IS NOT NULL"),
        postgresql_where=text("sample_id IS NOT NULL"),
    ),
    Index(  # the failed rows of a run, in order (queried as ``failed IS 1`` / ``IS true``)
        "ix_rows_failed",
        "run_id",
        "idx",
        sqlite_where=text("failed IS 1"),
        postgresql_where=text("failed IS TRUE"),
    ),
)

labels = Table(
    "labels",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), index=True),
    Column("row_index", Integer),
    Column("sample_id", Text, index=True),  # revision 0002
    Column("metric", Text, nullable=False),
    Column("label", Text, nullable=False),  # JSON: a number, a bool or a word
    Column("note", Text),
    Column("annotator", Text),
    Column("created", DateTime(timezone=True), nullable=False),
    # revision 0006: a row's latest label of a metric, without reading the run's other labels
    Index("ix_labels_run_metric_row", "run_id", "metric", "row_index"),
)

claims = Table(  # revision 0003: which `turneval watch` process scores a conversation
    "claims",
    metadata,
    Column("key", Text, primary_key=True),  # "trace:<id>" or "session:<id>"
    Column("owner", String(32), nullable=False),  # the claiming watch's state folder id
    Column("run_id", String(32)),
    Column("claimed", DateTime(timezone=True), nullable=False),
)

watch_skips = Table(  # revision 0005: conversations a `turneval watch` run did not score, and why
    "watch_skips",
    metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("conversation", Text, primary_key=True),  # "trace:<id>" or "session:<id>"
    Column("reason", String(32), nullable=False),  # no_conversation, filtered, sampled_out, ...
    Column("detail", Text),  # why, in words ("no service.name=checkout")
    Column("trace_ids", Text, nullable=False),  # JSON: the conversation's trace ids
    Column("created", DateTime(timezone=True), nullable=False),
    Index("ix_watch_skips_run_created", "run_id", "created"),
)

judge_configs = Table(  # revision 0007: judge configurations made from a run's labels
    "judge_configs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), index=True),
    Column("metric", Text, nullable=False),
    Column("digest", String(80), nullable=False),  # sha256:<hex> of instructions and examples
    Column("parent", String(80)),  # the digest of the configuration it started from
    Column("config", Text, nullable=False),  # JSON: the judge configuration file's content
    Column("report", Text),  # JSON: the optimisation's report (before/after, intervals, cost)
    Column("created", DateTime(timezone=True), nullable=False),
)

# -- revision 0008: dataset versions (issue 49; turneval.store._datasets) -----------------------

datasets = Table(  # a dataset's content, kept once by its digest
    "datasets",
    metadata,
    Column("digest", String(64), primary_key=True),  # the file's SHA-256 (as runs record it)
    Column("rows", Integer, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
)

dataset_versions = Table(  # a name's versions, 1, 2, ..., each naming a content
    "dataset_versions",
    metadata,
    Column("name", Text, primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("digest", String(64), ForeignKey("datasets.digest"), nullable=False, index=True),
    Column("path", Text),  # the file it was added from
    Column("created", DateTime(timezone=True), nullable=False),
)

dataset_rows = Table(  # a content's lines, with the key and digest a diff pairs them by
    "dataset_rows",
    metadata,
    Column(
        "digest",
        String(64),
        ForeignKey("datasets.digest", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("position", Integer, primary_key=True, autoincrement=False),  # 0-based line
    Column("key", Text, nullable=False),  # metadata.id, id, or "line N" (made unique)
    Column("row_digest", String(64), nullable=False),  # SHA-256 of its canonical JSON
    Column("content", Text, nullable=False),  # the line as given
)
