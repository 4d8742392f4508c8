"""The generic run modules know no metric by name: extension points instead of name checks."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import turneval
from turneval.metrics import BUILTIN_METRICS, Evaluator

GENERIC = ["runner", "results", "pipeline", "stream", "engines", "aggregate"]


def _metric_words() -> set[str]:
    """Every built-in metric's name and every metric class's name."""
    names = {cls.model_fields["name"].default for cls in BUILTIN_METRICS}
    classes: set[str] = set()
    pending: list[type[Any]] = [Evaluator]
    while pending:
        cls = pending.pop()
        classes.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return {name for name in names | classes if isinstance(name, str)}


def _strings(tree: ast.AST) -> set[str]:
    """String literals outside docstrings, and the names used in the code."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found.add(node.value)
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def test_the_words_checked_include_the_ones_that_used_to_be_special_cased() -> None:
    words = _metric_words()
    assert {"overall_assessment", "AssessmentJudge", "OverallAssessment", "PairwiseMetric"} <= words
    tree = ast.parse('if type(m).__name__ == "AssessmentJudge": pass')
    assert _strings(tree) & words == {"AssessmentJudge"}  # the check below would catch it


@pytest.mark.parametrize("module", GENERIC)
def test_no_metric_name_in_a_generic_module(module: str) -> None:
    allowed = {"Evaluator", "Metric", "RowEvaluator"}  # the bases of every metric
    for path in _files(module):  # a module, or every module of a package (stream)
        used = _strings(ast.parse(path.read_text(encoding="utf-8"))) & _metric_words()
        assert used - allowed == set(), f"{path.name} names metrics: {sorted(used - allowed)}"


# -- provenance: what produced a row is typed (row.source, row.trial, row.agent) ---------------

PROVENANCE_GENERIC = [*GENERIC, "report", "compare", "distributed", "store", "view"]
"""The generic layers: none decodes what a source step recorded in a sample's metadata."""

PROVENANCE_KEYS = {
    "source",
    "otel",
    "conversion_error",
    "scenario_id",
    "trial",
    "stop_reason",
    "skipped_trials",
    "latency_s",
    "agent_usage",
    "user_usage",
    "user_model",
    "turn_timings",
    "thread_id",
}
"""The metadata keys the source steps (turneval.traces, turneval.simulation) write."""


def _literals(tree: ast.AST) -> set[str]:
    """String literals outside docstrings (typed attributes such as ``trial.scenario_id`` pass)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in docstrings
    }


def _files(module: str) -> list[Path]:
    root = Path(turneval.__file__).parent
    package = root / module
    return sorted(package.rglob("*.py")) if package.is_dir() else [root / f"{module}.py"]


def test_the_provenance_check_catches_a_metadata_key_and_passes_a_typed_field() -> None:
    decoded = ast.parse('if meta.get("source") == "otel" or "scenario_id" in meta: pass')
    assert _literals(decoded) & PROVENANCE_KEYS == {"source", "otel", "scenario_id"}
    typed = ast.parse("if row.trial is not None: key = row.trial.scenario_id")
    assert _literals(typed) & PROVENANCE_KEYS == set()


@pytest.mark.parametrize("module", PROVENANCE_GENERIC)
def test_no_generic_module_decodes_provenance_from_metadata(module: str) -> None:
    for path in _files(module):
        used = _literals(ast.parse(path.read_text(encoding="utf-8"))) & PROVENANCE_KEYS
        assert used == set(), f"{path.name} reads provenance metadata keys: {sorted(used)}"
