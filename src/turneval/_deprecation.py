"""Deprecated names that keep working: a keyword renamed, with a warning naming the new one.

Names users were shown in the docs are deprecated, never broken: the old keyword still works,
with a :class:`DeprecationWarning` naming the new one; given beside the new one it is a
:class:`TypeError` (never a silent choice between two values).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__ = ["deprecated", "renamed_keywords", "take_renamed"]

F = TypeVar("F", bound=Callable[..., Any])


def deprecated(message: str, *, stacklevel: int = 2) -> None:
    """Warn with ``message`` as a :class:`DeprecationWarning` (``stacklevel`` as for warn)."""
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)


def _called(function: Callable[..., Any]) -> str:
    """How a user calls ``function``: ``EvalTask`` for a constructor, else its name."""
    name = function.__qualname__
    return name.removesuffix(".__init__")


def take_renamed(
    called: str,
    given: dict[str, Any],
    renames: Mapping[str, str],
    *,
    why: str = "",
    stacklevel: int = 2,
    positional: frozenset[str] = frozenset(),
) -> None:
    """Move each old keyword of ``given`` to its new name (in place), warning for each.

    Args:
        called: How the function is called, for the messages (``EvalTask``).
        given: The keyword arguments as given; changed in place.
        renames: Old name to new name.
        why: Said after each warning (e.g. what the old name means now).
        stacklevel: The caller's frame for the warning, as for :func:`warnings.warn`, counted
            from the function that calls this one.
        positional: The parameters given by position (a new name among them is given too).

    Raises:
        TypeError: an old name given beside its new one.
    """
    for old, new in renames.items():
        if old not in given:
            continue
        if new in given or new in positional:
            raise TypeError(
                f"{called}() got both {old}= (its old name) and {new}=: pass {new} only"
            )
        deprecated(
            f"{called}({old}=...) is deprecated: pass {new}=...{' (' + why + ')' if why else ''}",
            stacklevel=stacklevel + 1,
        )
        given[new] = given.pop(old)


def renamed_keywords(renames: Mapping[str, str], *, why: str = "") -> Callable[[F], F]:
    """A decorator: the old keyword names of ``renames`` still work, with a warning.

    The decorated function keeps its signature (``inspect.signature`` and type checkers see
    the new names only); an old name is moved to the new one before the call (see
    :func:`take_renamed`). Works on functions, methods and coroutine functions. The wrapper
    keeps ``renames`` and ``why`` (``__renamed__``) and the function (``__wrapped__``), so
    :func:`~turneval._sync.sync_form` gives the sync form the same renames, warned in the
    caller's thread.
    """

    def decorate(function: F) -> F:
        called = _called(function)
        by_position = [
            parameter.name
            for parameter in inspect.signature(function).parameters.values()
            if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        ]

        def move(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            positional = frozenset(by_position[: len(args)])
            take_renamed(called, kwargs, renames, why=why, stacklevel=3, positional=positional)

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def coroutine(*args: Any, **kwargs: Any) -> Any:
                move(args, kwargs)
                return await function(*args, **kwargs)

            coroutine.__renamed__ = (renames, why)  # type: ignore[attr-defined]
            return coroutine  # type: ignore[return-value]

        @functools.wraps(function)
        def plain(*args: Any, **kwargs: Any) -> Any:
            move(args, kwargs)
            return function(*args, **kwargs)

        plain.__renamed__ = (renames, why)  # type: ignore[attr-defined]
        return plain  # type: ignore[return-value]

    return decorate
