"""``run.json``: what a streamed run was started with, so that ``resume`` checks it continues it.

Written into the run folder before the first row, and again before each chunk's rows are
written (the input's digest grows as the file is read)::

    {
      "turneval_version": "0.1.0",
      "metrics": [{"name": "tool_call_f1", "class": "turneval.metrics...ToolCallF1",
                   "config": {...}}],
      "judge": {"model": "gpt-4o-mini", "base_url": "http://localhost:8000/v1",
                "prompt_version": null, "configs": {"topic_adherence": {"digest": "sha256:..."}}},
      "dataset": {"path": "data.jsonl", "sha256": "...", "lines_read": 1000,
                  "bytes_read": 123456,
                  "version": {"digest": "...", "name": "support", "version": 3}}
    }

``config`` is the metric's full ``model_dump`` (a judge model object is written as its model
name). The judge's ``base_url`` is the server it calls (None: the provider's default), with no
user, password or query: an API key is never written. ``sha256`` is the digest of the input's
first ``lines_read`` lines (``bytes_read`` bytes): the part of the file the run has read;
``version`` is the dataset version it reads (:func:`~turneval.store.dataset_version`: the whole
file's digest, and its name and version when the run store keeps it). A
resumed run refuses to continue when the metrics, their configurations (but for fields that
change no score: :data:`NOT_SCORING`), the judge model or server, or that part of the input
differ, naming the first difference.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from turneval._files import naming
from turneval._version import VERSION
from turneval.errors import ConfigError
from turneval.metrics import Evaluator, JudgedMetric
from turneval.store import (  # one rule for naming a judge and a metric's configuration
    dataset_version,
    judge_model,
    metric_configs,
)

__all__ = [
    "NOT_SCORING",
    "RUN_FILE",
    "RunFile",
    "config_changes",
    "judge_base_url",
    "judge_configs",
    "judge_model",
]


RUN_FILE = "run.json"
"""The name of the run folder's record of what the run was started with."""


def judge_base_url(llm: Any) -> str | None:
    """The server a judge calls (``base_url`` of ``ChatOpenAI``), None: the provider's default.

    Only the scheme, host, port and path are kept: a user, password or query (where a key
    could hide) never reaches run.json.
    """
    if llm is None:
        return None
    inner = getattr(llm, "langchain_llm", None) or getattr(llm, "llm", None)
    for candidate in (llm, inner):
        for attribute in ("openai_api_base", "base_url", "azure_endpoint"):
            url = getattr(candidate, attribute, None)
            if isinstance(url, str) and url:
                parts = urlsplit(url)
                host = parts.hostname or ""
                if parts.port is not None:
                    host = f"{host}:{parts.port}"
                return urlunsplit((parts.scheme, host, parts.path, "", ""))
    return None


def judge_configs(metrics: Sequence[Evaluator]) -> dict[str, dict[str, Any]]:
    """Per judged metric loading a judge configuration: its digest, parent and source model.

    What run.json's ``judge.configs`` records (the configuration itself is in the metric's
    ``config``), so that a run says which judge configuration produced it and ``compare``
    names the change (``judge_config.instructions ... -> ...``).
    """
    recorded = {}
    for metric in metrics:
        config = metric.judge_config if isinstance(metric, JudgedMetric) else None
        if config is not None:
            recorded[metric.name] = {
                "digest": config.digest,
                "parent": config.parent,
                "model": config.model,
                "labels_digest": config.labels_digest,
            }
    return recorded


NOT_SCORING = frozenset({"pass_threshold", "timeout", "max_retries", "max_retry_after"})
"""Fields of a metric's configuration that change no score, left out of the resume check:
the pass bar (``--fail-under``: which rows are unstable is marked again from their votes) and
how judge calls are retried."""


def _scoring(config: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in config.items() if key not in NOT_SCORING}


def _changed(before: Any, after: Any, path: str = "") -> str:
    """The first key (dotted) whose value differs, with both values, or ``""``."""
    return next(_changes(before, after, path), "")


def _pruned(value: Any) -> Any:
    """``value`` without empty settings: ``None``, ``{}`` and ``[]`` at any depth mean unset."""
    if isinstance(value, dict):
        kept = {key: _pruned(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in (None, {}, [])}
    return value


def _changes(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """Each key (dotted, sorted) whose value differs, with both values: ``a.b 1 -> 2``."""
    before, after = _pruned(before), _pruned(after)
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            missing = object()
            old, new = before.get(key, missing), after.get(key, missing)
            if old is missing or new is missing or old != new:
                where = f"{path}.{key}" if path else str(key)
                if old is not missing and new is not missing:
                    deeper = list(_changes(old, new, where))
                    if deeper:
                        yield from deeper
                        continue
                shown = ["(unset)" if v is missing else json.dumps(v) for v in (old, new)]
                yield f"{where} {_clip(shown[0])} -> {_clip(shown[1])}"
        return
    if before != after:
        yield f"{path} {_clip(json.dumps(before))} -> {_clip(json.dumps(after))}"


def config_changes(
    before: Mapping[str, Any], after: Mapping[str, Any], *, ignored: Iterable[str] = ()
) -> list[str]:
    """What changed between two records of one metric (``{"name", "class", "config"}``).

    Each differing field of the configuration (dotted for nested ones), and the class, with
    both values (``arg_rules.*.city "exact" -> "ignore"``); the fields of :data:`NOT_SCORING`
    and ``ignored`` are left out. Empty when the two score alike.
    """
    leave = NOT_SCORING | set(ignored)
    configs = []
    for metric in (before, after):
        config = metric.get("config") or {}
        fields = config if isinstance(config, Mapping) else {"config": config}
        configs.append(
            {"class": metric.get("class"), **{k: v for k, v in fields.items() if k not in leave}}
        )
    return list(_changes(configs[0], configs[1]))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RunFile:
    """A run folder's ``run.json``: written at the start, checked on resume, kept up to date.

    Args:
        folder: The run folder (``out_dir``).
        source: The input file.
        metrics: The run's metrics, in order.
        llm: The run's default judge (None: none).
    """

    def __init__(self, folder: Path, source: Path, metrics: Sequence[Evaluator], llm: Any) -> None:
        """Describe the run; nothing is read or written yet."""
        self.path = folder / RUN_FILE
        self.source = source
        self.document: dict[str, Any] = {
            "turneval_version": VERSION,
            "metrics": metric_configs(metrics),
            "judge": {
                "model": judge_model(llm),
                "base_url": judge_base_url(llm),
                "prompt_version": None,
            },
            "dataset": {
                "path": str(source),
                "sha256": "",
                "lines_read": 0,
                "bytes_read": 0,
                "version": dataset_version(source),  # issue 49: the whole input's digest
            },
        }
        configs = judge_configs(metrics)
        if configs:  # only runs whose judges load a judge configuration record it
            self.document["judge"]["configs"] = configs
        self._digest = hashlib.sha256()
        self._handle: Any = None
        self._lines = self._bytes = 0

    def start(self) -> None:
        """A new run: write run.json (before the first row)."""
        self._save()

    def resume(self) -> bool:
        """Check that the run in the folder is this one; False when it has no run.json.

        Raises:
            ConfigError: one line naming the first difference (metrics, a metric's
                configuration, the judge, or the input read so far).
        """
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self._save()  # from now on the folder records this run
            return False
        except ValueError as exc:
            raise ConfigError(f"{self.path} is not a run record ({exc}); cannot resume") from exc
        if not isinstance(stored, dict):
            raise ConfigError(f"{self.path} is not a run record; cannot resume")
        problem = self._difference(stored)
        if problem:
            raise ConfigError(
                f"cannot resume {self.path.parent}: {problem}; rerun without --resume "
                "(--overwrite) or into another --out folder"
            )
        self.document["turneval_version"] = stored.get("turneval_version", VERSION)
        self._save()
        return True

    def _difference(self, stored: dict[str, Any]) -> str:
        here = self.document
        names = [m.get("name") for m in stored.get("metrics") or [] if isinstance(m, dict)]
        now = [m["name"] for m in here["metrics"]]
        if names != now:
            return (
                f"the metrics changed: the run has {', '.join(map(str, names)) or 'none'}; "
                f"this one has {', '.join(now) or 'none'}"
            )
        for old, new in zip(stored["metrics"], here["metrics"], strict=True):
            change = _changed(
                {"class": old.get("class"), **_scoring(old.get("config") or {})},
                {"class": new["class"], **_scoring(new["config"])},
            )
            if change:
                return f"metric {new['name']}'s configuration changed: {change}"
        old_judge = (stored.get("judge") or {}).get("model")
        if old_judge != here["judge"]["model"]:
            return f"the judge changed: {old_judge or 'none'} -> {here['judge']['model'] or 'none'}"
        judge = stored.get("judge") or {}
        if "base_url" in judge and judge["base_url"] != here["judge"]["base_url"]:  # recorded
            return (
                f"the judge's server changed: {judge['base_url'] or 'the default'} -> "
                f"{here['judge']['base_url'] or 'the default'}"
            )
        dataset = stored.get("dataset") or {}
        lines = int(dataset.get("lines_read") or 0)
        self._advance(lines)
        if self._lines < lines or self._digest.hexdigest() != dataset.get("sha256"):
            short = "it has fewer lines" if self._lines < lines else "they differ"
            return (
                f"the input changed: the run had read lines 1-{lines} of "
                f"{dataset.get('path', '?')}; {short} in {self.source}"
            )
        return ""

    def read_to(self, line: int) -> None:
        """The run has read the input up to ``line`` (1-based): record its digest so far."""
        if line > self._lines:
            self._advance(line)
            self._save()

    def close(self) -> None:
        """Close the input handle the digest reads with."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def _advance(self, line: int) -> None:
        if self._handle is None:
            self._handle = self.source.open("rb")
        while self._lines < line:
            raw = self._handle.readline()
            if not raw:
                break
            self._digest.update(raw)
            self._lines += 1
            self._bytes += len(raw)
        dataset = self.document["dataset"]
        dataset["lines_read"], dataset["bytes_read"] = self._lines, self._bytes
        dataset["sha256"] = self._digest.hexdigest()

    def _save(self) -> None:
        """Write run.json whole (a temporary file renamed over it: never half written)."""
        if not self.document["dataset"]["sha256"]:
            self.document["dataset"]["sha256"] = self._digest.hexdigest()
        partial = self.path.with_name(RUN_FILE + ".tmp")
        with naming(self.path):
            partial.write_text(json.dumps(self.document, indent=2) + "\n", encoding="utf-8")
            os.replace(partial, self.path)
