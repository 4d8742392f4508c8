"""Modules that moved (issue 44, item 4): every old path still imports, with a warning.

One table (``turneval._moved.MOVED``) holds every module made private or moved; nothing is
broken: an old path is the new module itself (the same object, the same names) once a
``DeprecationWarning`` has named where to import from. Class paths that earlier versions
recorded under an old path (run.json, the store, batch folders) are found without a warning.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import warnings
from pathlib import Path

import pytest

from turneval._moved import MOVED, current_module
from turneval.manifest import resolve_class

SRC = Path(__file__).resolve().parents[1] / "src"


def _file_of(module: str) -> Path:
    return SRC.joinpath(*module.split("."))


def forget(old: str) -> None:
    """Undo an import of ``old``: its sys.modules entry and its parent package's attribute."""
    sys.modules.pop(old, None)
    parent, _, leaf = old.rpartition(".")
    package = sys.modules.get(parent)
    if package is not None:
        vars(package).pop(leaf, None)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_moved_module_with_a_warning(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    forget(old)
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(old)} is deprecated: .*turneval"):
        module = importlib.import_module(old)
    forget(old)  # the next import of the old path warns again (other tests import it)
    assert module is new
    for name in getattr(new, "__all__", ()):
        assert getattr(module, name) is getattr(new, name)
    # the old path is no file of its own (the table is the one place it lives)
    assert not _file_of(old).with_suffix(".py").exists() and not _file_of(old).is_dir()


def test_from_a_package_import_its_old_module_name() -> None:
    importlib.import_module("turneval.cli")
    forget("turneval.cli.agents")
    with pytest.warns(DeprecationWarning, match="turneval.cli.agents is deprecated") as caught:
        from turneval.cli import agents  # type: ignore[attr-defined]  # the old layout's form
    assert agents is importlib.import_module("turneval.cli._agents")
    assert caught[0].filename == __file__  # the warning points at the importing line
    forget("turneval.cli.agents")


def test_class_paths_recorded_under_old_paths_resolve_without_a_warning() -> None:
    found = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for old, new in sorted(MOVED.items()):
            module = importlib.import_module(new)
            for name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                if isinstance(value, type) and value.__module__ == new:
                    assert resolve_class(f"{old}:{name}") is value  # batch's old form
                    assert resolve_class(f"{old}.{name}") is value  # the stream's old form
                    found += 1
    assert found > 100
    assert current_module("turneval.metrics.tool_calls") == "turneval.metrics._tool_calls"
    assert current_module("turneval.metrics") == "turneval.metrics"


def test_the_table_names_only_modules_that_exist_and_never_a_public_one_twice() -> None:
    for old, new in MOVED.items():
        assert old.startswith("turneval.") and new.startswith("turneval.")
        assert importlib.util.find_spec(new) is not None, new
        assert new not in MOVED, f"{old} -> {new} -> {MOVED[new]}: chain the entry"
