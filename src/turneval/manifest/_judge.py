"""``JudgeSpec``: the run's default judge as a run records it (never its key)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from turneval.manifest._config import model_name

__all__ = [
    "JudgeSpec",
    "judge_base_url",
    "judge_configs",
]


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


def judge_configs(metrics: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per judged metric loading a judge configuration: its digest, parent and source model.

    The one function that records which judge configuration produced a run (run.json's
    ``judge.configs``; the configuration itself is in the metric's ``config``, so a change
    of it is a change of the metric's configuration for ``--resume`` and ``compare``). A
    metric's ``judge_config`` is anything with a ``digest`` (a
    :class:`~turneval.judge.JudgeConfig`); metrics without one are left out.
    """
    recorded: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        config = getattr(metric, "judge_config", None)
        digest = getattr(config, "digest", None)
        if isinstance(digest, str):
            recorded[str(metric.name)] = {
                "digest": digest,
                "parent": getattr(config, "parent", None),
                "model": getattr(config, "model", None),
                "labels_digest": getattr(config, "labels_digest", None),
            }
    return recorded


@dataclass(frozen=True)
class JudgeSpec:
    """The run's default judge, as ``run.json`` keeps it.

    Attributes:
        model: Its model name (None: the run has no default judge).
        base_url: The server it calls, without user, password or query (None: the
            provider's default).
        prompt_version: The version of the judges' prompts (None: turneval's own).
        configs: Per judged metric loading a judge configuration, which one
            (:func:`judge_configs`: digest, parent, model, labels' digest); empty when none
            does.
        base_url_recorded: Whether the record holds ``base_url`` (run files of early
            versions do not; their server is then not checked).
    """

    model: str | None = None
    base_url: str | None = None
    prompt_version: str | None = None
    configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    base_url_recorded: bool = field(default=True, repr=False, compare=False)

    @classmethod
    def of(
        cls, llm: Any, metrics: Iterable[Any] = (), *, prompt_version: str | None = None
    ) -> JudgeSpec:
        """Record the judge ``llm`` (a chat model or None) and ``metrics``' judge configurations.

        See :func:`judge_configs`.
        """
        return cls(model_name(llm), judge_base_url(llm), prompt_version, judge_configs(metrics))

    @classmethod
    def from_dict(cls, record: Any) -> JudgeSpec:
        """Read a ``judge`` record (an empty one for anything that is not an object)."""
        if not isinstance(record, Mapping):
            return cls()

        def text(key: str) -> str | None:
            value = record.get(key)
            return None if value is None else str(value)

        configs = record.get("configs")
        return cls(
            text("model"),
            text("base_url"),
            text("prompt_version"),
            {
                str(name): dict(value)
                for name, value in (configs.items() if isinstance(configs, Mapping) else ())
                if isinstance(value, Mapping)
            },
            base_url_recorded="base_url" in record,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"model", "base_url", "prompt_version"}``, and ``configs`` when there are any."""
        record: dict[str, Any] = {
            "model": self.model,
            "base_url": self.base_url,
            "prompt_version": self.prompt_version,
        }
        if self.configs:  # only runs whose judges load a judge configuration record it
            record["configs"] = {name: dict(value) for name, value in self.configs.items()}
        return record

    def changes(self, other: JudgeSpec) -> list[str]:
        """What makes ``other`` another judge than this one: its model, its server.

        The server is compared when both records hold it. A judge configuration is part of
        its metric's configuration, compared there.
        """
        found = []
        if self.model != other.model:
            found.append(f"the judge changed: {self.model or 'none'} -> {other.model or 'none'}")
        if self.base_url_recorded and other.base_url_recorded and self.base_url != other.base_url:
            found.append(
                f"the judge's server changed: {self.base_url or 'the default'} -> "
                f"{other.base_url or 'the default'}"
            )
        return found
