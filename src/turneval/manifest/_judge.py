"""``JudgeSpec``: the run's default judge as a run records it (never its key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from turneval.manifest._changes import clip
from turneval.manifest._config import model_name

__all__ = [
    "JudgeSpec",
    "judge_base_url",
    "judge_config_ref",
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


def judge_config_ref(config: Any) -> str | None:
    """How a run names a judge configuration: its ``digest`` (``sha256:...``), or the text.

    ``config`` is a judge configuration object (anything with a ``digest``), a reference
    already (a digest, a file's path) or None.
    """
    if config is None:
        return None
    digest = getattr(config, "digest", None)
    if isinstance(digest, str) and digest:
        return digest
    return str(config)


@dataclass(frozen=True)
class JudgeSpec:
    """The run's default judge, as ``run.json`` keeps it.

    Attributes:
        model: Its model name (None: the run has no default judge).
        base_url: The server it calls, without user, password or query (None: the
            provider's default).
        prompt_version: The version of the judges' prompts (None: turneval's own).
        config: The judge configuration applied to the run's judged metrics (its digest,
            ``sha256:...``, see :func:`judge_config_ref`; None: none). A metric's own
            ``judge_config`` is recorded with its configuration.
        base_url_recorded: Whether the record holds ``base_url`` (run files of early
            versions do not; their server is then not checked).
    """

    model: str | None = None
    base_url: str | None = None
    prompt_version: str | None = None
    config: str | None = None
    base_url_recorded: bool = field(default=True, repr=False, compare=False)

    @classmethod
    def of(cls, llm: Any, *, prompt_version: str | None = None, config: Any = None) -> JudgeSpec:
        """Record the judge ``llm`` (a chat model or None) and the configuration it applies."""
        return cls(model_name(llm), judge_base_url(llm), prompt_version, judge_config_ref(config))

    @classmethod
    def from_dict(cls, record: Any) -> JudgeSpec:
        """Read a ``judge`` record (an empty one for anything that is not an object)."""
        if not isinstance(record, Mapping):
            return cls()

        def text(key: str) -> str | None:
            value = record.get(key)
            return None if value is None else str(value)

        return cls(
            text("model"),
            text("base_url"),
            text("prompt_version"),
            text("config"),
            base_url_recorded="base_url" in record,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"model", "base_url", "prompt_version"}``, and ``config`` when one is applied."""
        record: dict[str, Any] = {
            "model": self.model,
            "base_url": self.base_url,
            "prompt_version": self.prompt_version,
        }
        if self.config is not None:
            record["config"] = self.config
        return record

    def changes(self, other: JudgeSpec) -> list[str]:
        """What makes ``other`` another judge than this one: model, server, configuration.

        The server is compared when both records hold it; the configuration when either does.
        """
        found = []
        if self.model != other.model:
            found.append(f"the judge changed: {self.model or 'none'} -> {other.model or 'none'}")
        if self.base_url_recorded and other.base_url_recorded and self.base_url != other.base_url:
            found.append(
                f"the judge's server changed: {self.base_url or 'the default'} -> "
                f"{other.base_url or 'the default'}"
            )
        if self.config != other.config:
            found.append(
                f"the judge configuration changed: {clip(self.config or 'none', 80)} -> "
                f"{clip(other.config or 'none', 80)}"
            )
        return found
