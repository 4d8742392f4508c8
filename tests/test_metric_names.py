"""One name resolution for ``evaluate``, ``EvalTask`` and the command line, with suggestions.

A wrong name in Python got the whole list of names and no suggestion, where the command line
said ``did you mean``; both now call :func:`turneval.metrics.resolve_metric_name`.
"""

import contextlib
import io

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from turneval import HumanMessage, MultiTurnSample, evaluate
from turneval.agents import EvalTask
from turneval.cli import main
from turneval.errors import ConfigError
from turneval.metrics import TrajectorySingleToolUse, builtin_metrics

SAMPLES = [MultiTurnSample(user_input=[HumanMessage(content="hi")], reference_tool_calls=[])]
NAMES = sorted(builtin_metrics())


def test_evaluate_suggests_the_closest_names() -> None:
    with pytest.raises(ConfigError) as raised:
        evaluate(SAMPLES, ["tool_call_f2"])
    message = str(raised.value)
    assert message.startswith(
        "unknown metric 'tool_call_f2'; did you mean 'tool_call_f1', 'tool_call_valid' or "
        "'tool_call_efficiency'? known names: agent_goal_accuracy_with_reference, "
    )
    with pytest.raises(
        ConfigError, match="unknown metric 'Tool_Call_F1'; did you mean 'tool_call_f1'"
    ):
        evaluate(SAMPLES, "Tool_Call_F1")  # the case of a name is no hint's obstacle
    with pytest.raises(ConfigError, match="'rouge_scor'; did you mean 'rouge_score' or"):
        evaluate(SAMPLES, ["rouge_scor"])  # ragas' spelling suggested where it is closest
    with pytest.raises(ConfigError, match="'tool_call_f2'; did you mean 'tool_call_f1'"):
        EvalTask(SAMPLES, ["tool_call_f2"])


def test_a_name_nothing_resembles_lists_the_names() -> None:
    with pytest.raises(ConfigError) as raised:
        evaluate(SAMPLES, ["zzz"])
    assert str(raised.value) == f"unknown metric 'zzz'; known names: {', '.join(NAMES)}"


def test_a_metric_that_needs_options_is_named_with_its_class() -> None:
    with pytest.raises(ConfigError) as raised:
        evaluate(SAMPLES, ["trajectory_single_tool_use"])  # was "unknown metric name"
    assert str(raised.value) == (
        "metric 'trajectory_single_tool_use' needs its option(s) 'tool_name': pass "
        "TrajectorySingleToolUse(tool_name=...) instead of its name"
    )
    assert TrajectorySingleToolUse(tool_name="x").name == "trajectory_single_tool_use"


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(NAMES).flatmap(
        lambda name: st.tuples(st.just(name), st.integers(0, len(name) - 1), st.sampled_from("_xe"))
    )
)
def test_the_command_line_and_evaluate_give_the_same_suggestions(
    typo: tuple[str, int, str],
) -> None:
    """A one-letter slip of any metric name: the name comes first among the suggestions, and
    the command line gives the same ones as Python."""
    name, at, letter = typo
    wrong = name[:at] + letter + name[at + 1 :]
    spellings = {*NAMES, *(a for cls in builtin_metrics().values() for a in cls.ragas_names)}
    assume(wrong not in spellings)  # the slip made no other real name
    with pytest.raises(ConfigError) as raised:
        evaluate(SAMPLES, [wrong])
    python = str(raised.value)
    assert python.startswith(f"unknown metric {wrong!r}; did you mean {name!r}")
    hint = python.split("; ", 1)[1].split("? ", 1)[0] + "?"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["evaluate", "absent.jsonl", "--metric", wrong, "--out", "unused"])
    assert code == 2
    assert err.getvalue() == (
        f"turneval: error: unknown metric {wrong!r}; {hint} run 'turneval metrics' for the list\n"
    )
