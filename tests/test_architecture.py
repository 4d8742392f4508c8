"""The package's layers: imports only reach down the data flow, and no module-level cycle.

The checker reads the source with :mod:`ast` (nothing is imported). A module may import its own
layer and the layers below; imports under ``if TYPE_CHECKING:`` are ignored (they never run).
Imports inside a function are checked too, except the deferred conveniences listed in
``DEFERRED``. The checker itself is tested on a synthetic package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Lowest first. A module belongs to the first entry naming it or a package above it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "turneval.errors",
        "turneval.usage",
        "turneval._sync",
        "turneval._gc",
        "turneval._files",
        "turneval._hidden",
    ),
    ("turneval.messages",),
    ("turneval.formats",),
    ("turneval.samples",),
    ("turneval.results", "turneval.aggregate", "turneval.results_codec"),
    (
        "turneval.provenance",  # the source steps' record of what produced a sample
        "turneval.dataset",
        "turneval.dataset_schema",
        "turneval.traces",
        "turneval.integrations",
        "turneval.store",
    ),
    ("turneval.judge", "turneval.llms", "turneval.ratelimit"),
    ("turneval.grounding", "turneval._grounding_values"),
    ("turneval.worlds",),  # tool worlds: end-state metrics and scenarios read their state
    ("turneval.metrics",),
    (
        "turneval.pipeline",
        "turneval.runner",
        "turneval.agents",
        "turneval.simulation",
        "turneval.sequential",
        "turneval.estimate",
        "turneval.testing",
        "turneval._scripted",
        "turneval.pytest_plugin",
    ),
    (
        "turneval.report",
        "turneval.compare",
        "turneval.stats",
        "turneval.calibration",
        "turneval.stream",
        "turneval._runfile",  # the run folder's run.json (resume checks it)
        "turneval.distributed",
        "turneval.batch",
        "turneval.watch",  # turneval watch: the OTLP receiver scores with the pipeline
        "turneval.demo",
        "turneval.worlds.domains",  # ready-made worlds with their scenarios
    ),
    ("turneval.cli", "turneval"),
)

# (importer, imported): upward imports deferred into a function on purpose.
DEFERRED = {
    ("turneval.results", "turneval.report"),  # EvaluationResult.to_html renders the report
    ("turneval.messages", "turneval.formats"),  # the converters' original import path
    ("turneval.ratelimit", "turneval.estimate"),  # the token estimate of a request
    ("turneval.pipeline", "turneval.stream"),  # the JSONL line reader (belongs in dataset)
    ("turneval.batch", "turneval.cli"),  # batch._cli uses the CLI's judge flags and summary printer
}


def module_name(path: Path, root: Path) -> str:
    """``root/pkg/sub/mod.py`` -> ``pkg.sub.mod`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(
    tree: ast.Module, module: str, package: bool
) -> Iterator[tuple[str, list[str], bool, int]]:
    """``(module, imported names, at module level, line)`` for each runtime import of ``tree``.

    ``package`` says whether ``module`` is a package's ``__init__`` (for relative imports).
    """
    here = module.split(".") if package else module.split(".")[:-1]

    def visit(node: ast.AST, top: bool) -> Iterator[tuple[str, list[str], bool, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for orelse in child.orelse:
                    yield from visit(orelse, top)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, [], top, child.lineno
            elif isinstance(child, ast.ImportFrom):
                base = here[: len(here) - child.level + 1] if child.level else []
                target = ".".join([*base, *([child.module] if child.module else [])])
                yield target, [alias.name for alias in child.names], top, child.lineno
            else:
                inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                yield from visit(child, top and not inner)

    yield from visit(tree, True)


def layer_of(module: str, layers: Sequence[Sequence[str]]) -> int | None:
    """The index of the layer that owns ``module`` (longest matching prefix), None if none."""
    best: tuple[int, int] | None = None
    for index, layer in enumerate(layers):
        for owner in layer:
            if module == owner or module.startswith(owner + "."):
                if best is None or len(owner) > best[0]:
                    best = (len(owner), index)
    return None if best is None else best[1]


def check_layers(
    root: Path,
    package: str,
    layers: Sequence[Sequence[str]],
    deferred: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
) -> list[str]:
    """Every layering violation under ``root/package``, as readable lines (empty when clean).

    Reported: a module no layer owns, an import of a higher layer (unless deferred and listed
    in ``deferred``), and a cycle among the layer owners' module-level imports.
    """
    problems: list[str] = []
    owners = {owner for layer in layers for owner in layer}
    graph: dict[str, set[str]] = {}
    paths = sorted((root / package).rglob("*.py"))
    known = {module_name(path, root) for path in paths}
    for path in paths:
        module = module_name(path, root)
        mine = layer_of(module, layers)
        if mine is None:
            problems.append(f"{module}: in no layer")
            continue
        me = max((o for o in owners if module == o or module.startswith(o + ".")), key=len)
        tree = ast.parse(path.read_text("utf-8"))
        found = imports(tree, module, path.name == "__init__.py")
        for base, names, top, line in found:
            if base != package and not base.startswith(package + "."):
                continue
            # ``from pkg import sub`` imports the module pkg.sub when there is one
            targets = [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names]
            for target in dict.fromkeys(targets or [base]):
                theirs = layer_of(target, layers)
                if theirs is None:
                    problems.append(f"{module}:{line}: imports {target}, which is in no layer")
                    continue
                them = max(
                    (o for o in owners if target == o or target.startswith(o + ".")), key=len
                )
                if theirs > mine and (top or (me, them) not in deferred):
                    problems.append(
                        f"{module}:{line}: imports {target} (layer {theirs}) from layer {mine}"
                    )
                if top and them != me:
                    graph.setdefault(me, set()).add(them)
    problems.extend(f"import cycle: {' -> '.join(cycle)}" for cycle in _cycles(graph))
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one node (depth-first search)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_turneval_follows_its_layers() -> None:
    assert check_layers(SRC, "turneval", LAYERS, DEFERRED) == []


def test_checker_finds_upward_imports_unowned_modules_and_cycles(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("from pkg.high import thing\n")  # upward, module level
    (pkg / "high.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from pkg import low\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.top import T\n"  # typing only: allowed
        "def f():\n"
        "    from pkg.top import g\n"  # deferred upward: allowed only when listed
        "    from .low import y\n"  # relative, downward: allowed
    )
    (pkg / "top.py").write_text("import pkg.sub.leaf\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "leaf.py").write_text("import os\nfrom pkg.low import x\n")
    layers: tuple[tuple[str, ...], ...] = (("pkg.low", "pkg.sub"), ("pkg.high",), ("pkg.top",))

    assert check_layers(tmp_path, "pkg", layers) == [
        "pkg: in no layer",
        "pkg.high:6: imports pkg.top (layer 2) from layer 1",
        "pkg.low:1: imports pkg.high (layer 1) from layer 0",
        "import cycle: pkg.high -> pkg.low -> pkg.high",
    ]
    layers = (*layers[:2], ("pkg.top", "pkg"))
    (pkg / "low.py").write_text("import json\n")
    assert check_layers(tmp_path, "pkg", layers) == [
        "pkg.high:6: imports pkg.top (layer 2) from layer 1"
    ]
    assert check_layers(tmp_path, "pkg", layers, {("pkg.high", "pkg.top")}) == []


def test_results_imports_no_llm_framework() -> None:
    code = (
        "import sys, turneval.results, turneval.usage, turneval._sync, turneval.formats\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain_core', 'langchain_openai', 'openai'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_old_import_paths_still_work() -> None:
    from turneval._sync import run_sync
    from turneval.judge import Usage as JudgeUsage
    from turneval.judge.usage import Usage as OldUsage
    from turneval.metrics.base import run_sync as old_run_sync
    from turneval.usage import Usage

    assert OldUsage is Usage and JudgeUsage is Usage
    assert old_run_sync is run_sync
