"""ToolPermission, AgentLoopDetection, ToolCallEfficiency, StepBudget: hand-computed values,
reasons, bad input, and properties against independent oracles (hypothesis)."""

from fnmatch import fnmatchcase
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage
from turneval.agents import EvalTask
from turneval.errors import InvalidSampleError
from turneval.metrics import AgentLoopDetection, StepBudget, ToolCallEfficiency, ToolPermission
from turneval.metrics._tools import check_rule_tools
from turneval.metrics.arg_rules import RuleBook
from turneval.metrics.base import run_sync


def c(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


def chat(*items: Any, metadata: dict[str, Any] | None = None) -> MultiTurnSample:
    """Items: a str is a human turn; (call, result) an AI call answered by a tool; a call
    alone an unanswered AI call; ``None`` a final AI answer."""
    messages: list[Any] = []
    for item in items:
        if isinstance(item, str):
            messages.append(HumanMessage(content=item))
        elif item is None:
            messages.append(AIMessage(content="done"))
        elif isinstance(item, tuple):
            messages += [AIMessage(tool_calls=[item[0]]), ToolMessage(content=item[1])]
        else:
            messages.append(AIMessage(tool_calls=[item]))
    return MultiTurnSample(user_input=messages, metadata=metadata)


# -- ToolPermission --------------------------------------------------------------------------


def test_permission_share_and_reason_list_each_unauthorised_call() -> None:
    sample = chat(
        "go",
        (c("search", q="x"), "r"),
        (c("delete_user", id=1), "ok"),
        (c("db.get", k=1), "v"),
        None,
    )
    # Calls at user_input[1], [3], [5]; delete_user denied; db.get not allowed -> 1/3.
    metric = ToolPermission(allowed=["search", "delete_*"], denied=["delete_*"])
    result = metric.score(sample)
    assert result.value == pytest.approx(1 / 3)
    assert result.reason == (
        'authorised=1/3=0.333; unauthorised: delete_user({"id": 1}) at user_input[3] '
        "(denied by 'delete_*'); db.get({\"k\": 1}) at user_input[5] "
        "(not in allowed ['search', 'delete_*'])"
    )
    assert [u["message_index"] for u in result.details["unauthorised"]] == [3, 5]


def test_permission_glob_patterns_and_no_calls() -> None:
    sample = chat("go", (c("db.get"), "v"), (c("db.set"), "v"), (c("dbxget"), "v"))
    assert ToolPermission(allowed=["db.?et"]).score(sample).value == pytest.approx(2 / 3)
    assert ToolPermission(denied=["db*"]).score(sample).value == 0.0
    assert ToolPermission(allowed=[]).score(sample).value == 0.0  # nothing allowed
    empty = ToolPermission(denied=["x"]).score(chat("hi", None))
    assert (empty.value, empty.reason) == (1.0, "no tool calls: 1.0")


def test_permission_reads_the_samples_policy_when_not_configured() -> None:
    sample = chat("go", (c("a"), "r"), (c("b"), "r"), metadata={"denied_tools": ["b"]})
    assert ToolPermission().score(sample).value == 0.5
    with pytest.raises(InvalidSampleError, match="allowed_tools") as caught:
        ToolPermission().score(chat("go", (c("a"), "r")))
    assert caught.value.field == "metadata.allowed_tools"
    bad = chat("go", (c("a"), "r"), metadata={"allowed_tools": "a"})
    with pytest.raises(InvalidSampleError, match="must be a list"):
        ToolPermission().score(bad)


def test_permission_bad_config_and_nameless_call() -> None:
    with pytest.raises(ValidationError, match="non-empty"):
        ToolPermission(denied=[""])
    with pytest.raises(ValidationError):
        ToolPermission(alowed=["a"])  # type: ignore[call-arg]
    nameless = chat("go", (c(""), "r"))
    with pytest.raises(InvalidSampleError, match=r"user_input\[1\]\.tool_calls\[0\]"):
        run_sync(ToolPermission(denied=["x"]).multi_turn_ascore, nameless)


names = st.sampled_from(["get", "set", "del_a", "del_b", "db.get"])
patterns = st.lists(st.sampled_from(["get", "*et", "del_*", "db.*", "?et", "nope"]), max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(names, max_size=6), st.none() | patterns, patterns)
def test_permission_equals_the_glob_oracle_and_denial_wins(
    calls: list[str], allowed: list[str] | None, denied: list[str]
) -> None:
    sample = chat("go", *[(c(name), "r") for name in calls])
    value = run_sync(ToolPermission(allowed=allowed, denied=denied).multi_turn_ascore, sample)

    def ok(name: str) -> bool:
        permitted = allowed is None or any(fnmatchcase(name, p) for p in allowed)
        return permitted and not any(fnmatchcase(name, p) for p in denied)

    expected = sum(map(ok, calls)) / len(calls) if calls else 1.0
    assert value == pytest.approx(expected)
    # Denying more never raises the score; denying what is allowed still denies it.
    stricter = run_sync(
        ToolPermission(allowed=allowed, denied=[*denied, "get"]).multi_turn_ascore, sample
    )
    assert stricter <= value
    both = run_sync(ToolPermission(allowed=["*"], denied=["*"]).multi_turn_ascore, sample)
    assert both == (0.0 if calls else 1.0)


# -- AgentLoopDetection ------------------------------------------------------------------------


def test_no_loop_gives_one_and_says_so() -> None:
    sample = chat("go", (c("a", x=1), "r1"), (c("a", x=2), "r2"), (c("b"), "r3"), None)
    result = AgentLoopDetection().score(sample)
    assert (result.value, result.reason) == (1.0, "no loop in 3 tool calls: 1.0")


def test_repeat_beyond_threshold_is_a_loop() -> None:
    # Same call three times with different results: repeats only (no same-result finding).
    sample = chat(
        "go", (c("poll", id=7), "busy"), (c("poll", id=7.0), "wait"), (c("poll", id=7), "x")
    )
    result = AgentLoopDetection().score(sample)
    assert result.value == 0.0
    [loop] = result.details["loops"]
    assert loop["kind"] == "repeat" and loop["count"] == 3
    assert loop["message_indices"] == [1, 3, 5]
    assert 'poll({"id": 7}) called 3 times in one turn (max_repeats=2)' in result.reason
    assert AgentLoopDetection(max_repeats=3).score(sample).value == 1.0


def test_cycle_of_two_calls() -> None:
    a, b = c("search", q="x"), c("open", n=1)
    items = [(a, f"s{i}") if i % 2 == 0 else (b, f"o{i}") for i in range(6)]  # a b a b a b
    result = AgentLoopDetection(max_repeats=3).score(chat("go", *items))
    # max_repeats=3: each call occurs 3 times (allowed), but the cycle a->b is done 3 times in
    # a row... which is not more than 3: no loop.
    assert result.value == 1.0
    result = AgentLoopDetection().score(chat("go", *items))
    kinds = [loop["kind"] for loop in result.details["loops"]]
    assert kinds == ["repeat", "repeat", "cycle"]
    assert "cycle search -> open done 3+ times in a row from user_input[1]" in result.reason


def test_same_call_same_result_is_a_loop_and_turns_reset_it() -> None:
    call = c("lookup", k="a")
    looping = chat("go", (call, "nothing"), (call, "nothing"), None)
    result = AgentLoopDetection().score(looping)
    assert result.value == 0.0
    [loop] = result.details["loops"]
    assert loop == {
        "kind": "same_result",
        "call": 'lookup({"k": "a"})',
        "message_indices": [1, 3],
        "text": 'lookup({"k": "a"}) at user_input[3] repeats user_input[1] and got the same result',
    }
    # A new human turn between the calls: the user asked again, not a loop.
    assert AgentLoopDetection().score(chat("go", (call, "x"), "again", (call, "x"))).value == 1.0
    # A different result: the agent learned something.
    assert AgentLoopDetection().score(chat("go", (call, "x"), (call, "y"))).value == 1.0


loop_calls = st.lists(
    st.builds(lambda n, k: (c(n, k=k), f"{n}{k}"), st.sampled_from("ab"), st.integers(0, 2)),
    max_size=7,
)


@settings(max_examples=60, deadline=None)
@given(loop_calls, loop_calls, st.integers(1, 3))
def test_loop_properties(first: list[Any], more: list[Any], max_repeats: int) -> None:
    metric = AgentLoopDetection(max_repeats=max_repeats)

    def score(items: list[Any]) -> float:
        return run_sync(metric.multi_turn_ascore, chat("go", *items))

    base = score(first)
    # Distinct calls never loop; a loop found stays found when the turn goes on.
    if len({str(call) for call, _ in first}) == len(first):
        assert base == 1.0
    if base == 0.0:
        assert score(first + more) == 0.0
    # One call per turn never loops.
    split = [x for item in first for x in ("again", item)]
    assert run_sync(metric.multi_turn_ascore, chat("go", *split)) == 1.0
    # Any call made max_repeats + 1 times in a turn is a loop.
    if first:
        call, result = first[0]
        repeated = [(call, f"{result}{i}") for i in range(max_repeats + 1)]
        assert score(repeated) == 0.0


# -- ToolCallEfficiency ------------------------------------------------------------------------


def test_efficiency_redundant_calls_and_budget() -> None:
    weather = c("weather", city="Paris")
    sample = chat(
        "weather?",
        (weather, "sunny"),  # [1]
        (weather, "sunny"),  # [3] redundant: same call, same result, same turn
        (c("uv", city="Paris"), "3"),  # [5]
        "and again?",
        (weather, "sunny"),  # [8] new user turn: not redundant
        (weather, "rain"),  # [10] different result: not redundant
        None,
    )
    result = ToolCallEfficiency().score(sample)
    assert result.value == pytest.approx(4 / 5)
    assert result.reason == (
        'efficient=4/5=0.800; redundant: weather({"city": "Paris"}) at user_input[3] '
        "repeats user_input[1] with the same result"
    )
    # Budget of 3: calls 4 and 5 are beyond it; the redundant one is within -> 2/5 efficient.
    budget = ToolCallEfficiency(max_calls=3).score(sample)
    assert budget.value == pytest.approx(2 / 5)
    assert "2 call(s) beyond max_calls=3, from user_input[8]" in budget.reason
    assert [b["message_index"] for b in budget.details["beyond_budget"]] == [8, 10]


def test_efficiency_edges() -> None:
    assert ToolCallEfficiency().score(chat("hi", None)).value == 1.0
    # Unanswered identical calls count as the same result.
    assert ToolCallEfficiency().score(chat("go", c("f"), c("f"))).value == 0.5
    assert ToolCallEfficiency(max_calls=0).score(chat("go", (c("f"), "r"))).value == 0.0
    with pytest.raises(ValidationError):
        ToolCallEfficiency(max_calls=-1)


# -- StepBudget --------------------------------------------------------------------------------


def test_step_budget() -> None:
    sample = chat("go", (c("a"), "r"), (c("b"), "r"), (c("c"), "r"), None)  # 4 AI messages
    assert StepBudget(max_steps=4).score(sample).value == 1.0
    over = StepBudget(max_steps=3).score(sample)
    assert over.value == pytest.approx(3 / 4)
    assert over.reason == "4 steps (AI messages) over max_steps=3: budget=3/4=0.750"
    stated = sample.model_copy(update={"metadata": {"steps": 6, "max_steps": 2}})
    assert StepBudget().score(stated).value == pytest.approx(2 / 6)
    with pytest.raises(InvalidSampleError, match="max_steps"):
        StepBudget().score(sample)
    bad = sample.model_copy(update={"metadata": {"max_steps": "3"}})
    with pytest.raises(InvalidSampleError, match="positive integer"):
        StepBudget().score(bad)
    with pytest.raises(ValidationError):
        StepBudget(max_steps=0)


def test_results_follow_tool_call_ids_and_bad_tool_lists() -> None:
    a = ToolCall(name="get", args={"k": 1}, id="c1")
    b = ToolCall(name="get", args={"k": 2}, id="c2")
    # Parallel calls answered out of order, then the same pair again with the same results.
    first = [
        AIMessage(tool_calls=[a, b]),
        ToolMessage(content="two", tool_call_id="c2"),
        ToolMessage(content="one", tool_call_id="c1"),
    ]
    again = [
        AIMessage(tool_calls=[a, b]),
        ToolMessage(content="one", tool_call_id="c1"),
        ToolMessage(content="two", tool_call_id="c2"),
    ]
    sample = MultiTurnSample(user_input=[HumanMessage(content="go"), *first, *again])
    result = ToolCallEfficiency().score(sample)
    assert result.value == 0.5  # both repeats matched to their own results
    assert [r["message_index"] for r in result.details["redundant"]] == [4, 4]
    book = RuleBook({"get": {}})
    for tools, field in [("get", "metadata.tools"), ([{"nm": "get"}], "metadata.tools[0]")]:
        bad = sample.model_copy(update={"metadata": {"tools": tools}})
        with pytest.raises(InvalidSampleError) as caught:
            check_rule_tools(ToolCallEfficiency(), book, bad)
        assert caught.value.field == field
    openai_style = sample.model_copy(
        update={"metadata": {"tools": [{"type": "function", "function": {"name": "get"}}]}}
    )
    check_rule_tools(ToolCallEfficiency(), book, openai_style)  # known: no error


def test_step_budget_counts_the_steps_of_an_agent_run() -> None:
    def agent(history: list[Any]) -> list[Any]:  # two model steps per human turn
        call = ToolCall(name="look", args={"n": len(history)})
        return [AIMessage(tool_calls=[call]), ToolMessage(content="x"), AIMessage(content="ok")]

    dataset = [
        MultiTurnSample(user_input=[HumanMessage(content="a"), HumanMessage(content="b")]),
        MultiTurnSample(user_input=[HumanMessage(content="a")]),
    ]
    result = EvalTask(dataset, [StepBudget(max_steps=3)]).evaluate(runnable=agent)
    assert [row.steps for row in result.rows] == [4, 2]
    assert [row.score("step_budget") for row in result.rows] == [0.75, 1.0]
