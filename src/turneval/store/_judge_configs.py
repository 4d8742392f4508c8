"""Judge configurations kept beside the run whose labels made them (schema revision 0007).

The SQL of :meth:`RunStore.add_judge_config`, :meth:`RunStore.judge_configs` and
:meth:`RunStore.judge_config`; the configuration and its report are kept as JSON text, read
back as dicts (the store knows no judge: ``turneval.judge.JudgeConfig.from_json`` reads them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["StoredJudgeConfig", "add_config", "find_config", "list_configs"]


@dataclass(frozen=True)
class StoredJudgeConfig:
    """A judge configuration kept in the store.

    Attributes:
        id: Its id in the store.
        run_id: The run whose labels made it (None: made elsewhere).
        metric: The metric it configures.
        digest: ``sha256:<hex>`` of its instructions and examples.
        parent: The digest of the configuration it started from (None: the metric's prompts).
        config: The configuration file's content.
        report: The optimisation's report (None: none kept).
        created: When it was kept (UTC).
    """

    id: int
    run_id: str | None
    metric: str
    digest: str
    parent: str | None
    config: dict[str, Any]
    report: dict[str, Any] | None
    created: datetime


def add_config(
    connection: Connection,
    run_id: str | None,
    config: dict[str, Any],
    report: dict[str, Any] | None,
) -> int:
    """Insert one configuration; returns its id."""
    from sqlalchemy import insert

    from turneval.store._schema import judge_configs

    metric, digest = config.get("metric"), config.get("digest")
    if not isinstance(metric, str) or not isinstance(digest, str):
        raise ConfigError("a stored judge configuration needs its 'metric' and its 'digest'")
    added = connection.execute(
        insert(judge_configs).values(
            run_id=run_id,
            metric=metric,
            digest=digest,
            parent=config.get("parent"),
            config=json.dumps(config),
            report=None if report is None else json.dumps(report),
            created=datetime.now(timezone.utc),
        )
    )
    key = added.inserted_primary_key
    return int(key[0]) if key is not None else 0


def _record(row: Any) -> StoredJudgeConfig:
    created = row.created if row.created.tzinfo else row.created.replace(tzinfo=timezone.utc)
    return StoredJudgeConfig(
        id=int(row.id),
        run_id=row.run_id,
        metric=row.metric,
        digest=row.digest,
        parent=row.parent,
        config=json.loads(row.config),
        report=None if row.report is None else json.loads(row.report),
        created=created,
    )


def list_configs(
    connection: Connection, run_id: str | None, metric: str | None
) -> list[StoredJudgeConfig]:
    """The configurations of a run (or all), of a metric (or all), newest first."""
    from sqlalchemy import select

    from turneval.store._schema import judge_configs

    query = select(judge_configs).order_by(judge_configs.c.id.desc())
    if run_id is not None:
        query = query.where(judge_configs.c.run_id == run_id)
    if metric is not None:
        query = query.where(judge_configs.c.metric == metric)
    return [_record(row) for row in connection.execute(query)]


def find_config(connection: Connection, config_id: int) -> StoredJudgeConfig:
    """One configuration by its id.

    Raises:
        ConfigError: no configuration has that id.
    """
    from sqlalchemy import select

    from turneval.store._schema import judge_configs

    row = connection.execute(select(judge_configs).where(judge_configs.c.id == config_id)).first()
    if row is None:
        raise ConfigError(f"the store keeps no judge configuration {config_id}")
    return _record(row)
