"""Modules that moved: their old dotted paths still import, with a ``DeprecationWarning``.

The public surface is what ``docs/api`` documents (see ``docs/architecture.md``). Modules that
were importable before but not documented became private (``turneval.cli.agents`` is now
``turneval.cli._agents``); an old path was never broken: :data:`MOVED` maps it to the module
it is now, and a finder on ``sys.meta_path`` (installed when :mod:`turneval` is imported)
makes ``import old.path`` give that module, the same object, once with a warning naming the
public place to import from. Class paths recorded by earlier versions (``run.json``, the store,
batch folders) are read through :func:`current_module`, without a warning: a run file is not
the user's code.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.machinery import ModuleSpec
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.abc import Loader
    from types import ModuleType

__all__ = ["MOVED", "current_module", "install"]

MOVED: dict[str, str] = {
    "turneval.calibration.alignment": "turneval.calibration._alignment",
    "turneval.calibration.budget": "turneval.calibration._budget",
    "turneval.calibration.candidates": "turneval.calibration._candidates",
    "turneval.calibration.labels": "turneval.calibration._labels",
    "turneval.calibration.measuring": "turneval.calibration._measuring",
    "turneval.calibration.optimizing": "turneval.calibration._optimizing",
    "turneval.calibration.outcome": "turneval.calibration._outcome",
    "turneval.calibration.paired": "turneval.calibration._paired",
    "turneval.calibration.pairing": "turneval.calibration._pairing",
    "turneval.calibration.planning": "turneval.calibration._planning",
    "turneval.calibration.records": "turneval.calibration._records",
    "turneval.calibration.report": "turneval.calibration._report",
    "turneval.calibration.scales": "turneval.calibration._scales",
    "turneval.calibration.search": "turneval.calibration._search",
    "turneval.calibration.statistics": "turneval.calibration._statistics",
    "turneval.calibration.units": "turneval.calibration._units",
    "turneval.cli.agents": "turneval.cli._agents",
    "turneval.cli.arguments": "turneval.cli._arguments",
    "turneval.cli.batch": "turneval.cli._batch",
    "turneval.cli.calibrate": "turneval.cli._calibrate",
    "turneval.cli.compare": "turneval.cli._compare",
    "turneval.cli.datasets": "turneval.cli._datasets",
    "turneval.cli.engines": "turneval.cli._engines",
    "turneval.cli.entry": "turneval.cli._entry",
    "turneval.cli.evaluate": "turneval.cli._evaluate",
    "turneval.cli.judge_flags": "turneval.cli._judge_flags",
    "turneval.cli.metrics": "turneval.cli._metrics",
    "turneval.cli.optimize": "turneval.cli._optimize",
    "turneval.cli.options": "turneval.cli._options",
    "turneval.cli.parser": "turneval.cli._parser",
    "turneval.cli.scenarios": "turneval.cli._scenarios",
    "turneval.cli.store": "turneval.cli._store",
    "turneval.cli.summary": "turneval.cli._summary",
    "turneval.cli.watch": "turneval.cli._watch",
    "turneval.engines.base": "turneval.engines._base",
    "turneval.engines.batch": "turneval.engines._batch",
    "turneval.engines.local": "turneval.engines._local",
    "turneval.engines.ray": "turneval.engines._ray",
    "turneval.formats.langchain": "turneval.formats._langchain",
    "turneval.formats.openai": "turneval.formats._openai",
    "turneval.grounding.check": "turneval.grounding._check",
    "turneval.grounding.codepoints": "turneval.grounding._codepoints",
    "turneval.grounding.dates": "turneval.grounding._dates",
    "turneval.grounding.index": "turneval.grounding._index",
    "turneval.grounding.llm": "turneval.grounding._llm",
    "turneval.grounding.offline": "turneval.grounding._offline",
    "turneval.grounding.quantities": "turneval.grounding._quantities",
    "turneval.grounding.records": "turneval.grounding._records",
    "turneval.grounding.sentences": "turneval.grounding._sentences",
    "turneval.grounding.tokens": "turneval.grounding._tokens",
    "turneval.grounding.values": "turneval.grounding._values",
    "turneval.judge.cache": "turneval.judge._cache",
    "turneval.judge.clients": "turneval.judge._clients",
    "turneval.judge.config": "turneval.judge._config",
    "turneval.judge.core": "turneval.judge._core",
    "turneval.judge.schema": "turneval.judge._schema",
    "turneval.judge.template": "turneval.judge._template",
    "turneval.judge.usage": "turneval.judge._usage",
    "turneval.judge_bench.who_and_when": "turneval.judge_bench._who_and_when",
    "turneval.messages.agents": "turneval.messages._agents",
    "turneval.messages.langchain": "turneval.messages._langchain",
    "turneval.messages.model": "turneval.messages._model",
    "turneval.messages.openai": "turneval.messages._openai",
    "turneval.messages.tool_results": "turneval.messages._tool_results",
    "turneval.metrics.behaviour": "turneval.metrics._behaviour",
    "turneval.metrics.conversation": "turneval.metrics._conversation",
    "turneval.metrics.custom": "turneval.metrics._custom",
    "turneval.metrics.goal": "turneval.metrics._goal",
    "turneval.metrics.grounding": "turneval.metrics._grounding",
    "turneval.metrics.text": "turneval.metrics._text",
    "turneval.metrics.tool_calls": "turneval.metrics._tool_calls",
    "turneval.metrics.tool_json": "turneval.metrics._tool_json",
    "turneval.metrics.topic": "turneval.metrics._topic",
    "turneval.metrics.trace": "turneval.metrics._trace",
    "turneval.metrics.trajectory": "turneval.metrics._trajectory",
    "turneval.metrics.votes": "turneval.metrics._votes",
    "turneval.metrics.world": "turneval.metrics._world",
    "turneval.provider_errors": "turneval._provider_errors",
    "turneval.rows": "turneval._rows",
    "turneval.runs.folder": "turneval.runs._folder",
    "turneval.runs.open": "turneval.runs._open",
    "turneval.runs.sink": "turneval.runs._sink",
    "turneval.runs.store": "turneval.runs._store",
    "turneval.runs.to_store": "turneval.runs._to_store",
    "turneval.sample_lines": "turneval._sample_lines",
    "turneval.scenarios.distill": "turneval.scenarios._distill",
    "turneval.scenarios.drafts": "turneval.scenarios._drafts",
    "turneval.scenarios.engine": "turneval.scenarios._engine",
    "turneval.scenarios.failures": "turneval.scenarios._failures",
    "turneval.scenarios.files": "turneval.scenarios._files",
    "turneval.scenarios.perturbations": "turneval.scenarios._perturbations",
    "turneval.scenarios.quality": "turneval.scenarios._quality",
    "turneval.scenarios.report": "turneval.scenarios._report",
    "turneval.scenarios.review": "turneval.scenarios._review",
    "turneval.scenarios.sources": "turneval.scenarios._sources",
    "turneval.scenarios.tools": "turneval.scenarios._tools",
    "turneval.stats.inference": "turneval.stats._inference",
    "turneval.store.migrations": "turneval.store._migrations",
    "turneval.stream.chunks": "turneval.stream._chunks",
    "turneval.stream.engine": "turneval.stream._engine",
    "turneval.stream.evaluate": "turneval.stream._evaluate",
    "turneval.stream.resume": "turneval.stream._resume",
    "turneval.stream.run": "turneval.stream._run",
    "turneval.stream.sink": "turneval.stream._sink",
    "turneval.stream.sources": "turneval.stream._sources",
    "turneval.stream.workers": "turneval.stream._workers",
    "turneval.worlds.domains": "turneval.simulation.domains",
}
"""Old module path -> the module it is now (one table: every moved module, nothing else)."""


def current_module(name: str) -> str:
    """The module ``name`` is now (``name`` itself when it did not move)."""
    return MOVED.get(name, name)


def _public_home(new: str) -> str:
    """Where to import from now: the nearest public package above the private module."""
    parts = new.split(".")
    while parts and any(part.startswith("_") for part in parts):
        parts.pop()
    return ".".join(parts) or "turneval"


class _Alias:
    """Loads an old path as the module it moved to (the same module object).

    A loader by its two methods (``importlib.abc`` is not imported: it costs ``import
    turneval`` more than the rest of the package module).
    """

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # a placeholder: exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns sys.modules[name] after this call, so the old name is
        # bound to the moved module itself (its attributes, its identity).
        sys.modules[module.__name__] = importlib.import_module(self.new)


class _Finder:
    """Finds the old paths of :data:`MOVED` (and nothing else): a meta path finder."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        home = _public_home(new)
        where = f"it moved to {new}" if home == new else "it is private now"
        # stacklevel 2: the importing line (warnings skips the import system's own frames)
        warnings.warn(
            f"{fullname} is deprecated: {where}; import its names from {home}",
            DeprecationWarning,
            stacklevel=2,
        )
        return ModuleSpec(fullname, cast("Loader", _Alias(new)))


_FINDER = _Finder()


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once; :mod:`turneval` calls it on import)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
