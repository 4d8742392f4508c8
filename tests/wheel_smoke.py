"""Run by `make wheel-check` with the installed wheel in a clean venv (not collected by pytest)."""

import importlib.metadata
import sys

import turneval

assert "site-packages" in turneval.__file__, turneval.__file__  # the wheel, not the worktree
assert not any(name.startswith("langchain") for name in sys.modules)
from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, evaluate  # noqa: E402

sample = MultiTurnSample(
    user_input=[
        HumanMessage(content="weather?"),
        AIMessage(tool_calls=[ToolCall(name="weather", args={"city": "Paris"})]),
    ],
    reference_tool_calls=[ToolCall(name="weather", args={"city": "Paris"})],
)
result = evaluate([sample], ["tool_call_f1", "tool_call_accuracy"])
assert result["tool_call_f1"] == [1.0] and result["tool_call_accuracy"] == [1.0], result
plugins = importlib.metadata.entry_points(group="pytest11")
assert [entry.value for entry in plugins if entry.name == "turneval"] == ["turneval.pytest_plugin"]
import turneval.pytest_plugin  # noqa: E402
from turneval.demo import DOMAINS, build_rows  # noqa: E402
from turneval.metrics._tool_call_accuracy import ToolCallAccuracy  # noqa: E402,F401

# The demo's scenarios are package data (turneval/data/demo_domains.json) inside the wheel.
assert [len(build_rows(domain)) for domain in DOMAINS] == [32, 32, 32]

print(f"wheel OK: turneval {turneval.__version__} from {turneval.__file__}")
