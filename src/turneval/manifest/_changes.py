"""What changed between two records of a configuration: each differing key, with both values.

Empty settings are unset settings (``None``, ``{}`` and ``[]`` at any depth), so a rule table
with no rule and no table at all compare equal; the class key of a metric held in a field
(``$class``) is compared only when both records have it (run files written before the
manifest did not write it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from turneval.manifest._config import CLASS_KEY

__all__ = [
    "NOT_SCORING",
    "changes",
    "clip",
]

NOT_SCORING = frozenset({"pass_threshold", "timeout", "max_retries", "max_retry_after"})
"""Fields of a metric's configuration that change no score, left out of the resume check and
of ``compare``'s: the pass bar (``--fail-under``: which rows are unstable is marked again from
their votes) and how judge calls are retried."""

_MISSING = object()


def _pruned(value: Any) -> Any:
    """``value`` without empty settings: ``None``, ``{}`` and ``[]`` at any depth mean unset."""
    if isinstance(value, dict):
        kept = {key: _pruned(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in (None, {}, [])}
    return value


def clip(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters (``...`` at the end when cut)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shown(value: Any) -> str:
    return "(unset)" if value is _MISSING else clip(json.dumps(value))


def changes(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """Each key (dotted, sorted) whose value differs, with both values: ``a.b 1 -> 2``."""
    before, after = _pruned(before), _pruned(after)
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            old, new = before.get(key, _MISSING), after.get(key, _MISSING)
            if key == CLASS_KEY and _MISSING in (old, new):
                continue  # recorded by one writer only
            if old is _MISSING or new is _MISSING or old != new:
                where = f"{path}.{key}" if path else str(key)
                if old is not _MISSING and new is not _MISSING:
                    deeper = list(changes(old, new, where))
                    if deeper:
                        yield from deeper
                        continue
                    if isinstance(old, dict) and isinstance(new, dict):
                        continue  # they differ only in what is not compared
                yield f"{where} {_shown(old)} -> {_shown(new)}"
        return
    if before != after:
        yield f"{path} {_shown(before)} -> {_shown(after)}"
