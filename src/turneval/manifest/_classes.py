"""Class paths: the one way a run names a metric's class, and finds the class again.

A class path is ``module:Qualname`` (the entry-point form: where the module ends is never a
guess). A turneval class is named by the shortest public package that exports it
(``turneval.metrics:ToolCallF1``, not its defining ``turneval.metrics._tool_calls``), so a
class that moves between turneval's private modules keeps its path. The dotted form
``module.Qualname`` of run files written before the manifest is read too, and a module that
moved since (:data:`turneval._moved.MOVED`) is read as the module it is now, without a warning.

Finding a class imports its module only when that is safe: a module of turneval, a module
already imported (the user's own metrics, once their module is loaded), or with
``import_any`` (a folder the caller wrote itself, as a batch run's). A run file from
elsewhere never makes turneval import a module of its choosing.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any, cast

from turneval._moved import current_module
from turneval.errors import ConfigError

__all__ = [
    "canonical_class",
    "class_path",
    "function_path",
    "resolve_class",
    "resolve_function",
]


def class_path(cls: type) -> str:
    """``module:Qualname`` of ``cls``; a turneval class by its shortest public package."""
    module, qualname = cls.__module__, cls.__qualname__
    if module.startswith("turneval.") and "." not in qualname:
        parts = module.split(".")
        for end in range(2, len(parts)):  # turneval.metrics before turneval.metrics.rubric
            parent = ".".join(parts[:end])
            namespace = sys.modules.get(parent)
            if namespace is not None and vars(namespace).get(qualname) is cls:
                return f"{parent}:{qualname}"
    return f"{module}:{qualname}"


def function_path(function: object) -> str | None:
    """``module:Qualname`` of a function defined at a module's top level.

    None for a lambda, a function defined inside another, or anything but a plain function.
    """
    if not isinstance(function, types.FunctionType):
        return None
    qualname = function.__qualname__
    if "<" in qualname or "." in qualname:
        return None
    return f"{function.__module__}:{qualname}"


def resolve_function(path: str, *, import_any: bool = False) -> Callable[..., Any]:
    """The function :func:`function_path` named, found as :func:`resolve_class` finds one.

    Raises:
        ConfigError: no such function, or its module may not be imported.
    """
    found = _resolve(path, (), import_any, "function", lambda target: callable(target))
    return cast("Callable[..., Any]", found)


def _importable(module: str, import_any: bool) -> bool:
    return import_any or module in sys.modules or module.split(".")[0] == "turneval"


def _candidates(path: str) -> list[tuple[str, str]]:
    """``(module, qualname)`` splits of ``path``: the one of ``a:B``, each of ``a.b.C``."""
    if ":" in path:
        module, _, qualname = path.partition(":")
        return [(module, qualname)]
    parts = path.split(".")
    return [(".".join(parts[:end]), ".".join(parts[end:])) for end in range(len(parts) - 1, 0, -1)]


def resolve_class(
    path: str, *, classes: Iterable[type] = (), import_any: bool = False, what: str = "class"
) -> type:
    """The class a class path names (either form).

    Args:
        path: ``module:Qualname`` or ``module.Qualname``.
        classes: Classes to take when the path names them, whatever their module's state
            (a user's metrics, their module not imported).
        import_any: Import any module the path names (only for files the caller wrote).
        what: How errors name the path (``"metric class"``).

    Raises:
        ConfigError: nothing of that path can be found, or found without importing a module
            that is neither turneval's nor already imported (naming the path and what to do).
    """
    wanted = canonical_text(path)
    for cls in classes:
        if canonical_text(class_path(cls)) == wanted or (
            f"{cls.__module__}.{cls.__qualname__}" == wanted
        ):
            return cls
    return cast(
        type, _resolve(path, classes, import_any, what, lambda target: isinstance(target, type))
    )


def _resolve(
    path: str,
    classes: Iterable[type],
    import_any: bool,
    what: str,
    fits: Callable[[object], bool],
) -> object:
    refused: list[str] = []
    found: object = None
    for module, qualname in _candidates(path):
        if not module or not qualname:
            continue
        if not _importable(module, import_any):
            refused.append(module)
            continue
        try:
            target: object = importlib.import_module(current_module(module))
        except ImportError:
            continue
        for part in qualname.split("."):
            target = getattr(target, part, None)
            if target is None:
                break
        if target is not None and fits(target):
            return target
        found = found if target is None else target
    if found is not None:
        raise ConfigError(f"{what} {path}: not a {what.split()[-1]}")
    if refused:
        raise ConfigError(
            f"{what} {path}: module {refused[-1]} is not imported, and a run file does not "
            "make turneval import it: import it first (or pass the class)"
        )
    raise ConfigError(f"{what} {path}: no such {what.split()[-1]}")


def canonical_text(path: str) -> str:
    """A class path in one form for comparing texts: ``a.b.C`` for ``a.b:C`` and ``a.b.C``."""
    return path.replace(":", ".")


def canonical_class(path: str | None) -> str | None:
    """The path two records of one class agree on (either form; the class moved or not).

    Records written before or after the class moved between turneval's modules, in either
    form, agree: the class's own :func:`class_path` when it can be found safely (see
    :func:`resolve_class`), else the dotted text.
    """
    if path is None:
        return None
    try:
        return class_path(resolve_class(path))
    except ConfigError:
        return canonical_text(path)
