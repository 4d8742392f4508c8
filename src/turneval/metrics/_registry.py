"""The metrics registry: every concrete metric class by its default name, and name resolution.

A metric class registers itself when it is defined (:class:`~turneval.metrics.base.Evaluator`
adds it to :data:`REGISTRY`); :mod:`turneval.metrics.base` re-exports these functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.metrics.base import Evaluator

__all__ = [
    "REGISTRY",
    "builtin_metrics",
    "load_builtins",
    "registered_metrics",
    "resolve_metric_name",
]

REGISTRY: dict[str, type[Evaluator]] = {}
"""Every concrete metric class defined so far, by its default ``name`` (the first claim wins)."""
_BUILTINS_LOADED = False


def load_builtins() -> None:
    """Import every built-in metric module once, so each has registered its name.

    ``turneval.metrics`` imports its modules on first use; the registry answers for all of
    them, and a user's class must not claim a built-in name before the built-in is defined.
    """
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        import_module("turneval.metrics")._import_all()
        _BUILTINS_LOADED = True


def registered_metrics() -> dict[str, type[Evaluator]]:
    """Every concrete metric class defined so far, by its default ``name`` (sorted by name).

    A :class:`Metric` subclass registers itself when its class is defined, if it is concrete
    (no abstract method left) and its ``name`` field has a string default. The first class to
    claim a name keeps it: a subclass that inherits its parent's name, or a user class that
    reuses a built-in name, does not replace the registered one.
    """
    load_builtins()
    return dict(sorted(REGISTRY.items()))


def builtin_metrics() -> dict[str, type[Evaluator]]:
    """The registered metrics that turneval itself defines, by name (sorted by name)."""
    return {
        name: cls
        for name, cls in registered_metrics().items()
        if cls.__module__.startswith("turneval.")
    }


def resolve_metric_name(
    name: str,
    known: Mapping[str, type[Evaluator]] | None = None,
    *,
    listing: str | None = None,
) -> str:
    """The name of the metric called ``name``: itself, or the one metric ragas calls so.

    The one name resolution of ``evaluate``, ``EvalTask`` and the command line (``bleu_score``
    is ragas' name for ``bleu``).

    Args:
        name: The name given.
        known: The metrics to resolve among, by name (default: :func:`builtin_metrics`).
        listing: What an unknown name's error ends with (default: the known names).

    Raises:
        ConfigError: ``name`` is ragas' name for several metrics (naming them), or no known
            metric's: the error names it and the closest known names (``did you mean
            'tool_call_f1'?``), one per metric, ragas' names included.
    """
    import difflib

    metrics = builtin_metrics() if known is None else known
    if name in metrics:
        return name
    ragas = sorted(key for key, cls in metrics.items() if name in cls.ragas_names)
    if len(ragas) == 1:
        return ragas[0]
    if ragas:
        raise ConfigError(f"{name!r} is ragas' name for {' and '.join(ragas)}: name one of them")
    spellings = {key: key for key in metrics}  # each spelling, to the one metric it names
    aliases = [(alias, key) for key, cls in metrics.items() for alias in cls.ragas_names]
    for alias, key in aliases:
        if sum(other == alias for other, _ in aliases) == 1:  # not ragas' name for two
            spellings.setdefault(alias, key)
    by_case = {spelling.lower(): spelling for spelling in spellings}
    suggested: dict[str, str] = {}  # metric -> its closest spelling, closest metrics first
    for close in difflib.get_close_matches(name.lower(), by_case, n=len(by_case), cutoff=0.6):
        suggested.setdefault(spellings[by_case[close]], by_case[close])
    shown = [repr(spelling) for spelling in list(suggested.values())[:3]]
    hint = f"did you mean {_either(shown)}? " if shown else ""
    tail = listing if listing is not None else f"known names: {', '.join(sorted(metrics))}"
    raise ConfigError(f"unknown metric {name!r}; {hint}{tail}")


def _either(items: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
