"""The package's layers: imports only reach down the data flow, no cycle, no private reach.

The checker reads the source with :mod:`ast` (nothing is imported). A module may import its own
layer and the layers below; imports under ``if TYPE_CHECKING:`` are ignored (they never run).
Imports inside a function count like module-level ones: they may not reach up, and they are
edges of the import graph between modules (not only between layer owners), which must have no
cycle. What a run is made of (results, pipeline, metrics) never imports the store, the viewer
or watch, neither itself nor through what its imports load. No module imports a private name (one
starting with ``_``) from another module; private modules (``pkg._mod``) are importable from
anywhere inside turneval (docs and examples may not: tests/test_exported_members.py). The
checker itself is tested on a synthetic package.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Lowest first. A module belongs to the first entry naming it or a package above it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "turneval.errors",
        "turneval.usage",
        "turneval._sync",
        "turneval._deprecation",
        "turneval._gc",
        "turneval._files",
        "turneval._dataset_rows",
        "turneval._hidden",
        "turneval._version",
        "turneval._provider_errors",
        "turneval._moved",
    ),
    ("turneval.messages",),
    ("turneval.formats",),
    ("turneval.samples",),
    ("turneval.manifest",),  # what a run was started with: run.json, metric records
    ("turneval.stats._inference",),  # pure statistics: intervals, a paired test, Holm
    ("turneval._rows", "turneval.aggregate"),  # a sample's row; summaries of rows
    (
        "turneval.results_codec",
        "turneval.clusters.grouping",  # failed rows grouped by their reasons (the report shows them)
        "turneval._html",  # the HTML kit: the report, the calibration page and the viewer share it
        "turneval.report",
    ),  # rows to and from results.jsonl, and HTML
    ("turneval.results",),  # a run: its rows, summary, files
    ("turneval.runs._sink",),  # where rows go: the sink protocol, rows, the memory sink
    ("turneval.runs._folder",),  # the folder sink: run.json, results.jsonl, summary.json
    (
        "turneval.provenance",  # the source steps' record of what produced a sample
        "turneval.dataset",
        "turneval.jsonl",
        "turneval._sample_lines",  # one JSONL line to one sample (streamed runs, the batch core)
        "turneval.dataset_schema",
        "turneval.traces",
        "turneval.integrations",
    ),
    # the run store's modules from the bottom up (RunStore is made of its parts), then the
    # package: one sink's database, below no generic module
    ("turneval.store._schema", "turneval.store._migrations"),  # the tables, their revisions
    (
        "turneval.store._engine",  # the database: URL, engine, transactions, migrations at open
        "turneval.store._skips",  # the queries of watch's skips, dataset versions and judge
        "turneval.store._datasets",  # configurations (RunStore's methods call them)
        "turneval.store._judge_configs",
    ),
    ("turneval.store._recorder",),  # a run's rows written as they finish (RunRecorder)
    ("turneval.store._runs",),  # runs' metadata
    ("turneval.store._rows", "turneval.store._labels"),  # rows read back; human labels
    ("turneval.store._transfer",),  # run folders imported and exported
    ("turneval.store._store",),  # RunStore: the parts together
    ("turneval.store",),
    ("turneval.runs._store", "turneval.runs._open"),  # the store sink; a run read back
    ("turneval.runs._to_store",),  # the store sink made and recognised without loading the store
    ("turneval.runs",),
    ("turneval.judge", "turneval.llms", "turneval.ratelimit"),
    ("turneval.options",),  # the run options, declared once for every front end
    # the grounding package, its modules from the bottom up, then its public surface
    ("turneval.grounding._records", "turneval.grounding._codepoints"),
    ("turneval.grounding._sentences", "turneval.grounding._tokens"),
    ("turneval.grounding._quantities", "turneval.grounding._dates"),
    ("turneval.grounding._values",),
    ("turneval.grounding._index",),
    ("turneval.grounding._offline", "turneval.grounding._llm"),
    ("turneval.grounding._check",),
    ("turneval.grounding",),
    ("turneval.worlds",),  # tool worlds: end-state metrics and scenarios read their state
    ("turneval.metrics",),
    ("turneval.agent_driver",),  # drives an agent turn by turn: EvalTask and simulation use it
    (
        "turneval.pipeline",
        "turneval.runner",
        "turneval.sequential",
        "turneval.estimate",
        "turneval.testing",
        "turneval._scripted",
        "turneval.pytest_plugin",
    ),
    # the simulation package, its modules from the bottom up, then its public surface
    ("turneval.simulation._scenarios",),  # what a user wants; read and checked
    ("turneval.simulation._users", "turneval.simulation.domains"),  # users; ready-made worlds
    ("turneval.simulation._conversation",),  # one conversation and its sample
    ("turneval.simulation._trials",),  # every scenario and trial: simulate, EvalTask's run
    ("turneval.simulation",),
    ("turneval.agents",),  # EvalTask: a replay, or scenarios played by the simulation
    # the stream package, its modules from the bottom up (its public surface sits below)
    ("turneval.stream._chunks",),
    ("turneval.stream.scoring", "turneval.stream._resume", "turneval.stream._sources"),
    ("turneval.stream._sink",),
    ("turneval.stream._engine",),
    ("turneval.stream._workers",),
    ("turneval.stream._run",),  # the run around an engine's scorer
    # the engines evaluate_jsonl itself knows: the base and the default (Local); the others
    # (Ray, Batch) sit with what they run on, below
    ("turneval.engines._base",),
    ("turneval.engines._local",),
    ("turneval.stream._evaluate",),
    # the batch engine's modules from the bottom up (the package itself is in the next row)
    ("turneval.batch._state", "turneval.batch._spec", "turneval.batch._providers"),
    ("turneval.batch._plan", "turneval.batch._status"),
    ("turneval.batch._usage",),
    ("turneval.batch._rounds",),
    ("turneval.batch._run",),
    ("turneval.batch._submit",),
    # the watch receiver's modules from the bottom up (regrade, which asks calibration, and
    # the package itself are in the next row)
    ("turneval.watch._logs", "turneval.watch._intake", "turneval.watch._alerts"),
    ("turneval.watch._budget", "turneval.watch._decode"),  # _decode: a request body read
    ("turneval.watch._scoring",),
    ("turneval.watch._watcher",),
    ("turneval.watch._metrics",),
    ("turneval.watch._server",),
    (
        "turneval.compare",
        "turneval.stats",
        "turneval.calibration",
        "turneval.stream",
        "turneval.batch",
        "turneval.engines",  # Ray (Ray Data actors), Batch (providers' batch APIs)
        "turneval.distributed",
        "turneval.watch",  # turneval watch: the OTLP receiver scores with the pipeline
        "turneval.view",  # turneval view: the run store in a local web app
        "turneval.demo",
        "turneval.clusters.naming",  # a judge names failure clusters
        "turneval.clusters",  # turneval clusters: a run's failed rows grouped
        "turneval.judge_bench",  # turneval judge-bench: a judge against people's labels
        "turneval.scenarios",  # generated scenarios: a judged job over sources, worlds, runs
    ),
    ("turneval.cli", "turneval"),
)


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


def import_graph(root: Path, package: str) -> dict[str, dict[str, bool]]:
    """Module to the modules of ``package`` it imports, each with whether at module level.

    Every runtime import counts, inside functions too (typing-only imports aside); ``from pkg
    import sub`` is an edge to the module ``pkg.sub`` when there is one, else to ``pkg``. An
    import at module level anywhere wins over one inside a function.
    """
    graph: dict[str, dict[str, bool]] = {}
    paths = sorted((root / package).rglob("*.py"))
    known = {module_name(path, root) for path in paths}
    for path in paths:
        module = module_name(path, root)
        edges = graph.setdefault(module, {})
        tree = ast.parse(path.read_text("utf-8"))
        for base, names, top, _line in imports(tree, module, path.name == "__init__.py"):
            if base != package and not base.startswith(package + "."):
                continue
            targets = [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names]
            for target in dict.fromkeys(targets or [base]):
                if target != module:
                    edges[target] = edges.get(target, False) or top
    return graph


def check_layers(root: Path, package: str, layers: Sequence[Sequence[str]]) -> list[str]:
    """Every layering violation under ``root/package``, as readable lines (empty when clean).

    Reported: a module no layer owns, an import of a higher layer (at module level or inside a
    function), a private name or module reached from outside (see the module docstring), and a
    cycle among the modules' imports (in-function imports included), inside a layer owner too.
    """
    problems: list[str] = []
    paths = sorted((root / package).rglob("*.py"))
    known = {module_name(path, root) for path in paths}
    packages = {module_name(path, root) for path in paths if path.name == "__init__.py"}
    for path in paths:
        module = module_name(path, root)
        mine = layer_of(module, layers)
        if mine is None:
            problems.append(f"{module}: in no layer")
            continue
        home = module if module in packages else module.rpartition(".")[0]
        tree = ast.parse(path.read_text("utf-8"))
        found = imports(tree, module, path.name == "__init__.py")
        for base, names, _top, line in found:
            if base != package and not base.startswith(package + "."):
                continue
            problems.extend(
                f"{module}:{line}: {problem}" for problem in _private(base, names, home, known)
            )
            # ``from pkg import sub`` imports the module pkg.sub when there is one
            targets = [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names]
            for target in dict.fromkeys(targets or [base]):
                theirs = layer_of(target, layers)
                if theirs is None:
                    problems.append(f"{module}:{line}: imports {target}, which is in no layer")
                elif theirs > mine:
                    problems.append(
                        f"{module}:{line}: imports {target} (layer {theirs}) from layer {mine}"
                    )
    graph = {module: set(edges) for module, edges in import_graph(root, package).items()}
    problems.extend(f"import cycle: {' -> '.join(cycle)}" for cycle in _cycles(graph))
    return problems


def _inside(home: str, package: str) -> bool:
    return home == package or home.startswith(package + ".")


def _private(base: str, names: list[str], home: str, known: set[str]) -> Iterator[str]:
    """What ``from base import names`` (or ``import base``) reaches that it may not.

    Any module of the package may import a private module (``p._m``, from anywhere inside the
    package: the public surface is what docs/api documents, not what the layout allows); a
    private name (``_x`` of a module) is for its own module.
    """
    del home
    for name in names:
        if name.startswith("_") and not name.startswith("__") and f"{base}.{name}" not in known:
            yield f"imports private name {name} from {base}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per back edge of a depth-first search: none when the graph has no cycle."""
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


def reaches(
    graph: Mapping[str, Mapping[str, bool]], sources: Sequence[str], targets: Sequence[str]
) -> list[str]:
    """Each way a module under ``sources`` imports one under ``targets``, as ``a -> ... -> t``.

    A source's own imports count wherever they are (inside a function too); from there the
    path follows module-level imports, which run as the imported module loads (an import
    inside another module's function runs only when that function is called, and is that
    module's own business). One path per source and target, the shortest.
    """

    def under(module: str, owners: Sequence[str]) -> bool:
        return any(module == o or module.startswith(o + ".") for o in owners)

    found: list[str] = []
    for source in sorted(m for m in graph if under(m, sources)):
        parent: dict[str, str] = {target: source for target in graph[source]}
        queue = sorted(graph[source])
        while queue:
            module = queue.pop(0)
            if under(module, targets):
                path = [module]
                while path[-1] != source:
                    path.append(parent[path[-1]])
                found.append(" -> ".join(reversed(path)))
                continue
            for target, top in sorted(graph.get(module, {}).items()):
                if top and target not in parent and target != source:
                    parent[target] = module
                    queue.append(target)
    return found


def test_turneval_follows_its_layers() -> None:
    assert check_layers(SRC, "turneval", LAYERS) == []


# What a run is made of never loads what shows or keeps runs: the run store is one sink
# among others (reached through turneval.runs), the viewer and watch sit on top.
# (turneval.options opens the store a run option names, in a function, so that a store that
# cannot open fails before the run; reaches() does not follow an intermediate's lazy imports.)
GENERIC = (
    "turneval._rows",
    "turneval.aggregate",
    "turneval.manifest",
    "turneval.results_codec",
    "turneval.results",
    "turneval.metrics",
    "turneval.pipeline",
    "turneval.runner",
    "turneval.stream",
    "turneval.compare",
    "turneval.stats",
)
APPLICATIONS = ("turneval.store", "turneval.view", "turneval.watch")


def test_results_pipeline_and_metrics_never_import_the_store_the_viewer_or_watch() -> None:
    assert reaches(import_graph(SRC, "turneval"), GENERIC, APPLICATIONS) == []


def test_reaches_follows_a_sources_own_imports_then_module_level_ones(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text("def f():\n    from pkg import mid\n")  # its own, in a function
    (pkg / "mid.py").write_text("import pkg.app\n")  # loads the app as it loads
    (pkg / "core2.py").write_text("from pkg import mid2\n")
    (pkg / "mid2.py").write_text("def g():\n    import pkg.app\n")  # mid2's own business
    (pkg / "app.py").write_text("from pkg import core\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.core"] == {"pkg.mid": False}
    assert reaches(graph, ["pkg.core", "pkg.core2"], ["pkg.app"]) == [
        "pkg.core -> pkg.mid -> pkg.app"
    ]
    assert reaches(graph, ["pkg.mid2"], ["pkg.app"]) == ["pkg.mid2 -> pkg.app"]


def test_checker_finds_upward_imports_cycles_and_private_reach(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from pkg.high import thing\n")  # upward, deferred
    (pkg / "high.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from pkg import low\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.top import T\n"  # typing only: allowed
        "def f():\n"
        "    from .low import y\n"  # relative, downward: allowed
        "    from pkg.low import _hidden\n"  # another module's private name
    )
    (pkg / "top.py").write_text("import pkg.sub.leaf\nfrom pkg.sub import _impl\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub._impl import thing\n")  # its own
    # a lazy cycle inside one layer owner (pkg.sub) is a cycle too
    (pkg / "sub" / "_impl.py").write_text("thing = 1\ndef f():\n    from pkg.sub import leaf\n")
    (pkg / "sub" / "leaf.py").write_text("import os\nfrom pkg.low import x\nfrom . import _impl\n")
    layers: tuple[tuple[str, ...], ...] = (("pkg.low", "pkg.sub"), ("pkg.high",), ("pkg.top",))

    assert check_layers(tmp_path, "pkg", layers) == [
        "pkg: in no layer",
        "pkg.high:7: imports private name _hidden from pkg.low",
        "pkg.low:2: imports pkg.high (layer 1) from layer 0",
        "import cycle: pkg.high -> pkg.low -> pkg.high",
        "import cycle: pkg.sub._impl -> pkg.sub.leaf -> pkg.sub._impl",
    ]
    layers = (*layers[:2], ("pkg.top", "pkg"))
    (pkg / "low.py").write_text("import json\n_hidden = 1\n")
    (pkg / "sub" / "_impl.py").write_text("thing = 1\n")
    (pkg / "top.py").write_text("import pkg.sub.leaf\nfrom pkg.sub import thing\n")
    (pkg / "high.py").write_text("from pkg import low\ndef f():\n    from pkg.top import g\n")
    assert check_layers(tmp_path, "pkg", layers) == [
        "pkg.high:3: imports pkg.top (layer 2) from layer 1"  # in a function or not: upward
    ]
    (pkg / "high.py").write_text("from pkg import low\n")
    assert check_layers(tmp_path, "pkg", layers) == []


def test_worlds_never_import_the_simulation() -> None:
    """Worlds sit below the simulation (the old path turneval.worlds.domains is an alias)."""
    found = []
    for path in sorted((SRC / "turneval" / "worlds").rglob("*.py")):
        module = module_name(path, SRC)
        tree = ast.parse(path.read_text("utf-8"))
        for target, _names, _top, line in imports(tree, module, path.name == "__init__.py"):
            if target == "turneval.simulation" or target.startswith("turneval.simulation."):
                found.append(f"{module}:{line}")
    assert found == []


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
    from turneval.usage import Usage

    sys.modules.pop("turneval.judge.usage", None)  # as if never imported in this process
    with pytest.warns(DeprecationWarning, match=r"turneval\.judge\.usage is deprecated"):
        from turneval.judge.usage import Usage as OldUsage  # type: ignore[import-not-found]
    from turneval.metrics.base import run_sync as old_run_sync

    assert OldUsage is Usage and JudgeUsage is Usage
    assert old_run_sync is run_sync


def test_the_architecture_page_draws_these_layers() -> None:
    # docs/architecture.md's layer table: one row per layer, or one row per package whose
    # modules are layered inside it (a -> b), every owner named in its row, rows in order
    page = (SRC.parent / "docs" / "architecture.md").read_text("utf-8")
    section = page.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    named = [set(re.findall(r"`([\w.]+)`", row.split(" | ")[1])) for row in rows[1:]]
    named[-1].add("turneval")  # "the `turneval` package" is written in words
    place: dict[str, int] = {}
    for number, names in enumerate(named):
        for name in names:
            place.setdefault(f"turneval.{name}" if name != "turneval" else name, number)
    owners = [owner for layer in LAYERS for owner in layer]
    assert sorted(set(owners) - set(place)) == [], "layers the page does not draw"
    assert sorted(set(place) - set(owners)) == [], "modules the page draws in no layer"
    rows_in_order = [max(place[owner] for owner in layer) for layer in LAYERS]
    assert rows_in_order == sorted(rows_in_order), "the page's rows are not the layers' order"
