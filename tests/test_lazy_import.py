"""`import turneval` loads no LLM framework; names still resolve on first use."""

import json
import subprocess
import sys

import pytest

import turneval

HEAVY = (
    "langchain",
    "langchain_core",
    "langchain_openai",
    "langsmith",
    "openai",
    "numpy",
    "pandas",
)


def imported_after(code: str) -> list[str]:
    script = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    output = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    return list(json.loads(output.splitlines()[-1]))


def roots(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_import_turneval_loads_only_its_package_module() -> None:
    before = set(imported_after("pass"))
    after = set(imported_after("import turneval"))
    new = after - before
    # and turneval._moved, the finder of moved modules' old paths (it imports only the stdlib)
    assert sorted(name for name in new if name.startswith("turneval")) == [
        "turneval",
        "turneval._moved",
    ]
    assert not roots(sorted(new)) & set(HEAVY)


def test_cli_help_loads_no_llm_framework() -> None:
    modules = imported_after(
        "from turneval.cli import build_parser\ntry:\n    build_parser().parse_args(['--help'])\n"
        "except SystemExit:\n    pass"
    )
    assert not roots(modules) & {"langchain_core", "langchain_openai", "langsmith", "openai"}


def test_samples_and_datasets_load_no_langchain() -> None:
    modules = imported_after(
        "from turneval import EvaluationDataset, MultiTurnSample, HumanMessage\n"
        "MultiTurnSample(user_input=[HumanMessage(content='hi')])"
    )
    assert not roots(modules) & {"langchain_core", "langsmith"}


def test_lazy_names_resolve_and_unknown_names_raise() -> None:
    from turneval.runner import evaluate

    assert turneval.evaluate is evaluate
    assert "EvalTask" in dir(turneval) and set(turneval.__all__) <= set(dir(turneval))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = turneval.nope
    from turneval import judge

    with pytest.raises(AttributeError, match="turneval.judge' has no attribute 'nope'"):
        _ = judge.nope


def test_rule_based_evaluation_loads_no_langchain() -> None:
    modules = imported_after(
        "from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, evaluate\n"
        "calls = [ToolCall(name='a', args={'x': 1})]\n"
        "sample = MultiTurnSample(user_input=[HumanMessage(content='q'), AIMessage(tool_calls="
        "calls)], reference_tool_calls=calls)\n"
        "result = evaluate(sample, ['tool_call_f1', 'tool_call_accuracy', 'trajectory_recall'])\n"
        "assert result['tool_call_f1'] == [1.0], result"
    )
    assert not roots(modules) & {"langchain_core", "langchain_openai", "langsmith", "openai"}


def test_import_metrics_loads_no_llm_framework_nor_numerics() -> None:
    """``import turneval.metrics`` stays light (see benchmarks/README.md for its CPU time).

    numpy, rapidfuzz, asyncio and the grounding engine load when first needed.
    """
    modules = imported_after("import turneval.metrics")
    heavy = {"langchain_core", "langchain_openai", "langsmith", "openai", "numpy", "pandas"}
    assert not roots(modules) & (heavy | {"rapidfuzz", "asyncio"})
    assert "turneval.grounding" not in modules
    used = imported_after(
        "from turneval.metrics import NonLLMStringSimilarity\n"
        "assert NonLLMStringSimilarity().compare('abc', 'abd') == 1 - 1 / 3"
    )
    assert "rapidfuzz" in roots(used)


def test_import_metrics_builds_no_metric_class() -> None:
    """``import turneval.metrics`` loads its package module alone; a name loads its module."""
    new = set(imported_after("import turneval.metrics")) - set(imported_after("pass"))
    assert sorted(name for name in new if name.startswith("turneval")) == [
        "turneval",
        "turneval._moved",
        "turneval.metrics",
    ]
    assert "pydantic" not in roots(sorted(new))
    used = imported_after("from turneval.metrics import ToolCallAccuracy")
    assert "turneval.metrics._tool_calls" in used
    assert "turneval.metrics.rubric" not in used


def test_registry_lists_every_builtin_whatever_was_imported_first() -> None:
    """The registry imports the built-ins it has not seen; a user's class never claims one."""
    code = (
        "from turneval.metrics.base import MultiTurnMetric, Outcome, registered_metrics\n"
        "from turneval.samples import MultiTurnSample\n"
        "class Mine(MultiTurnMetric):\n"
        "    name: str = 'tool_call_accuracy'\n"
        "    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:\n"
        "        return Outcome(0.0, 'none')\n"
        "class Other(MultiTurnMetric):\n"
        "    name: str = 'my_own_metric'\n"
        "    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:\n"
        "        return Outcome(0.0, 'none')\n"
        "registry = registered_metrics()\n"
        "print(registry['tool_call_accuracy'].__module__, registry['my_own_metric'].__name__)\n"
        "import turneval.metrics as m\n"
        "print(len(m.BUILTIN_METRICS), 'turneval.metrics.rubric' in sys.modules)\n"
    )
    script = f"import sys\n{code}"
    output = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert output[0] == "turneval.metrics._tool_calls Other"
    count, rubric = output[1].split()
    assert int(count) >= 49 and rubric == "True"
