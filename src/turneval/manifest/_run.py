"""``RunManifest``: what a run was started with, the one reader and writer of ``run.json``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._files import file_digest, naming
from turneval._version import VERSION
from turneval.errors import ConfigError
from turneval.manifest._judge import JudgeSpec
from turneval.manifest._metric import MetricSpec

if TYPE_CHECKING:
    from turneval.metrics import Evaluator

__all__ = [
    "DatasetSpec",
    "RUN_FILE",
    "RunManifest",
    "dataset_version",
]

RUN_FILE = "run.json"
"""The name of a run folder's manifest: what the run was started with."""

_KNOWN = ("turneval_version", "metrics", "judge", "dataset", "source", "batch", "name")


@dataclass
class DatasetSpec:
    """The input a run read, as ``run.json`` keeps it.

    Attributes:
        path: The input file (None: samples given in memory).
        sha256: The SHA-256 of the part of the input the run has read (a streamed run's
            first ``lines_read`` lines), or of the whole input.
        lines_read: Lines of the input read so far (None: not counted).
        bytes_read: Bytes of the input read so far (None: not counted).
        version: The dataset version the run reads: ``{"digest", "name", "version"}``, the
            whole file's SHA-256, and its name and version when the run store keeps that
            content (``turneval datasets add``); ``compare`` checks it (None: not recorded).
    """

    path: str | None = None
    sha256: str | None = None
    lines_read: int | None = None
    bytes_read: int | None = None
    version: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, record: Any) -> DatasetSpec | None:
        """Read a ``dataset`` record (None for anything that is not an object)."""
        if not isinstance(record, Mapping):
            return None

        def number(key: str) -> int | None:
            value = record.get(key)
            return int(value) if isinstance(value, (int, float)) and value == value else None

        path, digest = record.get("path"), record.get("sha256")
        version = record.get("version")
        return cls(
            None if path is None else str(path),
            None if digest is None else str(digest),
            number("lines_read"),
            number("bytes_read"),
            dict(version) if isinstance(version, Mapping) else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"path", "sha256"}``, and ``lines_read``, ``bytes_read`` and ``version`` when set."""
        record: dict[str, Any] = {"path": self.path, "sha256": self.sha256}
        if self.lines_read is not None:
            record["lines_read"] = self.lines_read
        if self.bytes_read is not None:
            record["bytes_read"] = self.bytes_read
        if self.version is not None:
            record["version"] = self.version
        return record


def dataset_version(
    path: str | os.PathLike[str], store: Any = None, *, digest: str | None = None
) -> dict[str, Any]:
    """What a run records of the dataset it reads (:attr:`DatasetSpec.version`).

    ``{"digest": SHA-256 of the file, "name": ..., "version": ...}``: the name and version
    when ``store`` (a :class:`~turneval.store.RunStore`) keeps that content (``turneval
    datasets add``), else None. ``digest``, when known, saves reading the file again.
    ``compare`` refuses two runs over different kept versions (``--allow-dataset-change``
    lists the rows added, removed and changed); the viewer shows a stored run's version.
    """
    digest = digest or file_digest(path)
    found = store.dataset_of(digest) if store is not None and digest else None
    return {
        "digest": digest,
        "name": None if found is None else found.name,
        "version": None if found is None else found.version,
    }


RUN_FILES = ("results.jsonl", "summary.json", "report.html")
"""The files of a run folder beside ``run.json``."""


def _manifest_path(path: str | os.PathLike[str]) -> Path:
    """``run.json`` of a run folder, of the folder of one of its files, or the file named."""
    where = Path(path)
    if where.is_dir():
        return where / RUN_FILE
    if where.name in RUN_FILES:
        return where.with_name(RUN_FILE)
    return where


@dataclass
class RunManifest:
    """What a run was started with: ``run.json``, written before its first row.

    The one writer and reader of ``run.json`` and of metric configurations: the streamed
    run (and its resume check), the store, batch runs, ``turneval watch``, ``regrade``,
    ``compare`` and calibration all record and rebuild metrics through it. A run read back
    with its manifest (:func:`turneval.runs.open_run`) rebuilds its metrics, so their summary
    figures come from the metrics themselves::

        {
          "turneval_version": "0.1.0",
          "metrics": [{"name": "tool_call_f1", "class": "turneval.metrics:ToolCallF1",
                       "config": {...}}],
          "judge": {"model": "gpt-4o-mini", "base_url": "http://localhost:8000/v1",
                    "prompt_version": null},
          "dataset": {"path": "data.jsonl", "sha256": "...", "lines_read": 1000,
                      "bytes_read": 123456,
                      "version": {"digest": "...", "name": "support", "version": 3}}
        }

    ``config`` holds every field of the metric (a chat model in a field is written as its
    model name: an API key is never written; the judge's ``base_url`` keeps no user,
    password or query). Run files written before the manifest (the class as
    ``module.Qualname``, or ``module:Qualname`` as batch runs wrote it) are read as well.

    Attributes:
        metrics: Each metric, in the run's order.
        judge: The run's default judge.
        dataset: The input (None: not recorded).
        turneval_version: The turneval that started the run.
        source: What started it, when not a run of a file (``"turneval watch"``).
        batch: A batch run's section: its requests, batches, usage and cost (None: not a
            batch run).
        extra: Other top-level keys (a front end's own settings), kept as they are.
        name: The run's name (``turneval evaluate --name``): the store and the viewer show it,
            so two runs of one file can be told apart (None: not named).
    """

    metrics: list[MetricSpec] = field(default_factory=list)
    judge: JudgeSpec = field(default_factory=JudgeSpec)
    dataset: DatasetSpec | None = None
    turneval_version: str = VERSION
    source: str | None = None
    batch: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    @classmethod
    def of(
        cls,
        metrics: Iterable[Evaluator],
        llm: Any = None,
        *,
        dataset: DatasetSpec | None = None,
        source: str | None = None,
        extra: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> RunManifest:
        """The manifest of a run of ``metrics`` with the default judge ``llm`` (named ``name``).

        The judge configurations the metrics load are recorded too (:class:`JudgeSpec`).
        """
        metrics = list(metrics)
        return cls(
            [MetricSpec.of(metric) for metric in metrics],
            JudgeSpec.of(llm, metrics),
            dataset,
            source=source,
            extra=dict(extra or {}),
            name=name,
        )

    @property
    def metric_names(self) -> list[str]:
        """The metrics' names, in order."""
        return [metric.name for metric in self.metrics]

    # -- JSON ----------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, document: Any, where: str = "run record") -> RunManifest:
        """Read a run.json document (either class-path form).

        Raises:
            ConfigError: it is not a run record (no ``metrics`` list, a metric without a
                name), naming ``where``.
        """
        metrics = document.get("metrics") if isinstance(document, Mapping) else None
        if not isinstance(metrics, list):
            raise ConfigError(f'{where}: not a run record (no "metrics" list)')
        assert isinstance(document, Mapping)
        batch = document.get("batch")
        source = document.get("source")
        name = document.get("name")
        return cls(
            [
                MetricSpec.from_dict(item, f"{where}: metric {number}")
                for number, item in enumerate(metrics, start=1)
            ],
            JudgeSpec.from_dict(document.get("judge")),
            DatasetSpec.from_dict(document.get("dataset")),
            str(document.get("turneval_version") or VERSION),
            None if source is None else str(source),
            dict(batch) if isinstance(batch, Mapping) else None,
            {key: value for key, value in document.items() if key not in _KNOWN},
            None if name is None else str(name),
        )

    def to_dict(self) -> dict[str, Any]:
        """The run.json document (``dataset``, ``source``, ``batch`` and ``name`` when set)."""
        document: dict[str, Any] = {
            "turneval_version": self.turneval_version,
            "metrics": [metric.to_dict() for metric in self.metrics],
            "judge": self.judge.to_dict(),
        }
        if self.dataset is not None:
            document["dataset"] = self.dataset.to_dict()
        if self.source is not None:
            document["source"] = self.source
        if self.batch is not None:
            document["batch"] = self.batch
        if self.name is not None:
            document["name"] = self.name
        document.update({k: v for k, v in self.extra.items() if k not in document})
        return document

    # -- files ---------------------------------------------------------------------------

    @classmethod
    def find(cls, path: str | os.PathLike[str]) -> RunManifest | None:
        """The manifest of a run folder (or of its results.jsonl or summary.json), if any.

        None when the folder has no ``run.json`` (a run from before it) or ``path`` is a file
        of another name (a results file outside a run folder).

        Raises:
            ConfigError: the run.json there is not a run record (naming it).
        """
        target = _manifest_path(path)
        if target.name != RUN_FILE or not target.is_file():
            return None
        return cls.read(target)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> RunManifest:
        """Read ``run.json`` (a file, or the one of a run folder).

        Raises:
            ConfigError: it is missing, not JSON or not a run record (naming the file).
        """
        target = _manifest_path(path)
        try:
            document = json.loads(target.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{target}: no such run record") from None
        except (OSError, ValueError) as exc:
            detail = " ".join(str(exc).split())
            raise ConfigError(f"{target}: not a run record ({detail})") from None
        return cls.from_dict(document, str(target))

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write ``run.json`` (into a folder, or as the file named); returns the file.

        Written whole: a temporary file renamed over it, never half written.
        """
        target = Path(path)
        if target.is_dir():
            target = target / RUN_FILE
        partial = target.with_name(target.name + ".tmp")
        with naming(target):
            partial.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
            os.replace(partial, target)
        return target

    # -- what changed --------------------------------------------------------------------

    def changes(self, other: RunManifest) -> list[str]:
        """What makes ``other`` another run than this one (``resume`` refuses it).

        In order: another list of metrics; per metric, its first configuration change
        (fields that change no score left out, :data:`~turneval.manifest.NOT_SCORING`; a judge
        configuration a metric loads is part of its configuration); another judge (model,
        server). Empty when ``other`` continues this run
        (the input is checked apart, as it is read).
        """
        names, now = self.metric_names, other.metric_names
        if names != now:
            return [
                f"the metrics changed: the run has {', '.join(names) or 'none'}; this one has "
                f"{', '.join(now) or 'none'}"
            ]
        found = []
        for old, new in zip(self.metrics, other.metrics, strict=True):
            changed = old.changes(new)
            if changed:
                found.append(f"metric {new.name}'s configuration changed: {changed[0]}")
        return found + self.judge.changes(other.judge)

    def metric_changes(self, other: RunManifest, *, ignored: Iterable[str] = ()) -> list[str]:
        """Each metric of one name configured differently here and in ``other``.

        ``name (field old -> new; ...)``, as ``compare`` names them. Metrics only one run has are not compared; ``ignored`` fields (and those that change
        no score) do not count.
        """
        return metric_changes(self.metrics, other.metrics, ignored=ignored)

    # -- metrics -------------------------------------------------------------------------

    def build_metrics(
        self,
        llm: Any = None,
        *,
        classes: Iterable[type] = (),
        import_any: bool = False,
        strict: bool = True,
    ) -> list[Evaluator]:
        """The run's metrics built again (see :meth:`MetricSpec.build`).

        With ``strict=False``, a metric that cannot be built (a user's class not imported, a
        configuration an older turneval wrote) is left out instead of raising.

        Raises:
            ConfigError: (strict) a metric cannot be built, naming it.
        """
        classes = tuple(classes)
        built = []
        for spec in self.metrics:
            try:
                built.append(spec.build(llm, classes=classes, import_any=import_any))
            except ConfigError:
                if strict:
                    raise
        return built


def metric_changes(
    baseline: Sequence[MetricSpec], candidate: Sequence[MetricSpec], *, ignored: Iterable[str] = ()
) -> list[str]:
    """:meth:`RunManifest.metric_changes` of two lists of metric records."""
    before = {spec.name: spec for spec in baseline}
    differing = []
    for spec in candidate:
        if spec.name in before:
            changed = before[spec.name].changes(spec, ignored=ignored)
            if changed:
                differing.append(f"{spec.name} ({'; '.join(changed)})")
    return differing
