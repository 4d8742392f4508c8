"""Run folders in and out of the store: ``turneval store import`` and ``export``.

:class:`TransferPart` is the part of :class:`turneval.store.RunStore` that reads a run folder
(``results.jsonl``, ``summary.json``, ``run.json``: each checked, an error naming the file and
field or the line) into a new stored run, and writes a stored run back as a folder.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from turneval._hidden import shown
from turneval._version import VERSION
from turneval.errors import ConfigError
from turneval.manifest import RUN_FILE, RunManifest
from turneval.store._engine import first_line, now
from turneval.store._recorder import RunRecorder
from turneval.store._rows import RowsPart

if TYPE_CHECKING:
    from turneval.store._store import RunStore


class TransferPart(RowsPart):
    """Run folders imported into the store and exported from it."""

    def import_run(self, run_dir: str | os.PathLike[str], *, name: str | None = None) -> str:
        """Bring in a run folder (results.jsonl, summary.json, run.json when present).

        Returns the new run's id. The rows are read and written in batches.

        Raises:
            ConfigError: the folder has no results.jsonl, or a line of it is not a JSON row
                (naming the line).
        """
        folder = Path(run_dir)
        results = folder / "results.jsonl" if folder.is_dir() else folder
        if not results.is_file():
            raise ConfigError(f"{folder}: no results.jsonl to import (a run's --out folder?)")
        folder = results.parent
        # the files' types checked first (an error names the file and field), then read
        meta = _checked(folder / RUN_FILE, _RunFile)
        summary = _checked(folder / "summary.json", _SummaryFile)
        listed = meta.get("metrics") is not None
        manifest = (  # None: a folder from before run.json
            RunManifest.from_dict(
                {**meta, "metrics": meta.get("metrics") or []}, str(folder / RUN_FILE)
            )
            if meta
            else None
        )
        dataset = None if manifest is None else manifest.dataset
        names: list[str] | None = manifest.metric_names if manifest is not None and listed else None
        recorder = self._imported_run(
            name or (manifest and manifest.name) or folder.resolve().name,
            [] if manifest is None else [metric.to_dict() for metric in manifest.metrics],
            version=VERSION if manifest is None else manifest.turneval_version,
            judge=None if manifest is None else manifest.judge.model,
            dataset_path=None if dataset is None else dataset.path,
            dataset_digest=None if dataset is None else dataset.sha256,
            out_dir=folder,
        )
        try:
            with recorder:
                with results.open(encoding="utf-8") as handle:
                    for number, line in enumerate(handle, start=1):
                        text = line.rstrip("\r\n")
                        if not text.strip():
                            continue
                        record = _results_row(results, number, text, names)
                        if names is None:  # legacy: the names of the first row's reason columns
                            names = [key for key in record if f"{key}_reason" in record]
                            recorder.names = names
                            _results_row(results, number, text, names)  # its values, named
                            self._set_metrics(recorder.run_id, names)
                        recorder.add_record(text, record)
                recorder.finish(summary or None)
        except (ConfigError, UnicodeDecodeError) as exc:  # refused: no half-imported run left
            self.delete_run(recorder.run_id)
            if isinstance(exc, UnicodeDecodeError):
                raise ConfigError(f"{results}: not UTF-8 ({exc.reason})") from None
            raise
        return recorder.run_id

    def _imported_run(
        self,
        name: str,
        metrics: list[dict[str, Any]],
        *,
        version: str,
        judge: str | None,
        dataset_path: str | None,
        dataset_digest: str | None,
        out_dir: Path,
    ) -> RunRecorder:
        from sqlalchemy import insert

        from turneval.store._schema import runs

        run_id = uuid.uuid4().hex
        with self.writing() as connection:
            connection.execute(
                insert(runs).values(
                    id=run_id,
                    name=name,
                    created=now(),
                    turneval_version=version,
                    dataset_path=dataset_path,
                    dataset_digest=dataset_digest,
                    metrics=json.dumps(metrics),
                    judge_model=judge,
                    status="running",
                    out_dir=str(out_dir.resolve()),
                )
            )
        return RunRecorder(cast("RunStore", self), run_id, [str(m.get("name")) for m in metrics])

    def _set_metrics(self, run_id: str, names: list[str]) -> None:
        from sqlalchemy import update

        from turneval.store._schema import runs

        listed = [{"name": name, "class": None, "config": None} for name in names]
        with self.writing() as connection:
            connection.execute(
                update(runs).where(runs.c.id == run_id).values(metrics=json.dumps(listed))
            )

    def export_run(self, run_id: str, out_dir: str | os.PathLike[str]) -> Path:
        """Write a stored run's folder: results.jsonl (the rows as written) and summary.json.

        ``turneval compare``, ``plan`` and ``calibrate`` read the folder as they read the
        run's own. No run.json: the folder is a record of the run, not a run to resume (what
        the run was started with stays in the store). Returns the folder.
        """
        run = self.run(run_id)
        target = Path(out_dir)
        target.mkdir(parents=True, exist_ok=True)
        with (target / "results.jsonl").open("w", encoding="utf-8") as handle:
            for line in self.record_lines(run.id):
                handle.write(line + "\n")
        if run.summary is not None:
            text = json.dumps(run.summary, indent=2) + "\n"
            (target / "summary.json").write_text(text, encoding="utf-8")
        return target


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of a run folder ({} when absent), read as strict JSON."""
    from turneval.jsonl import strict_json_problem

    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        found = json.loads(text)
    except (ValueError, OSError, RecursionError) as exc:
        raise ConfigError(f"{path}: not readable JSON ({first_line(exc)})") from None
    problem = strict_json_problem(text)
    if problem is not None:
        raise ConfigError(f"{path}: not strict JSON: {problem}")
    if not isinstance(found, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return found


def _checked(path: Path, shape: Any) -> dict[str, Any]:
    """A run folder's JSON file checked against its layout ({} when absent).

    Only the fields turneval reads are checked (their types); others are kept as written.

    Raises:
        ConfigError: naming the file and the first field of the wrong type.
    """
    from pydantic import ValidationError

    found = _read_json(path)
    try:
        shape.model_validate(found)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the document"
        raise ConfigError(
            f"{path}: not a turneval {path.name}: {shown(where)}: {error['msg']} "
            f"(got {shown(_cut_repr(error.get('input')))})"
        ) from None
    return found


def _cut_repr(value: Any, size: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= size else text[: size - 1] + "…"


def _results_row(path: Path, number: int, text: str, names: list[str] | None) -> dict[str, Any]:
    """One results.jsonl line, strict JSON, with an integer index and numbers as values.

    Raises:
        ConfigError: naming the line and what is wrong with it.
    """
    from turneval.jsonl import strict_json_problem

    where = f"{path} line {number}"
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{where}: not a results.jsonl row (not JSON)") from None
    problem = strict_json_problem(text)
    if problem is not None:
        raise ConfigError(f"{where}: not strict JSON: {problem}")
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: not a results.jsonl row (not a JSON object)")
    index = record.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ConfigError(f"{where}: not a results.jsonl row ('index' must be an integer)")
    for name in names or ():
        value = record.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(
                f"{where}: {shown(repr(name))} must be a number or null, got "
                f"{shown(_cut_repr(value))}"
            )
    return record


class _Usage(BaseModel):
    """A judge usage record (summary.json): counts."""

    model_config = ConfigDict(extra="allow", strict=True)
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    calls: NonNegativeInt | None = None
    cached_calls: NonNegativeInt | None = None
    total_tokens: NonNegativeInt | None = None


class _MetricFigures(BaseModel):
    """One metric's figures in summary.json."""

    model_config = ConfigDict(extra="allow", strict=True)
    name: str | None = None
    mean: float | None = None
    std: float | None = None
    count: NonNegativeInt | None = None
    failed: NonNegativeInt | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    usage: _Usage | None = None
    extra: dict[str, float | None] | None = None


class _SummaryFile(BaseModel):
    """summary.json's layout (:func:`turneval.aggregate.summary_document`)."""

    model_config = ConfigDict(extra="allow", strict=True)
    samples: NonNegativeInt | None = None
    bad_lines: NonNegativeInt | None = None
    failed_rows: NonNegativeInt | None = None
    metrics: dict[str, _MetricFigures] | None = None
    usage: _Usage | None = None
    aggregates: dict[str, float | None] | None = None
    aggregate_errors: dict[str, str] | None = None
    skipped_traces: dict[str, NonNegativeInt] | None = None


class _StoredMetric(BaseModel):
    """A metric as run.json lists it: its name, class and configuration."""

    model_config = ConfigDict(extra="allow", strict=True)
    name: str
    class_: str | None = Field(default=None, alias="class")


class _Named(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    path: str | None = None
    sha256: str | None = None
    model: str | None = None


class _RunFile(BaseModel):
    """The fields of run.json an import reads."""

    model_config = ConfigDict(extra="allow", strict=True)
    turneval_version: str | None = None
    dataset: _Named | None = None
    judge: _Named | None = None
    metrics: list[_StoredMetric] | None = None
