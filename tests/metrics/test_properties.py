"""Properties of the rule-based metrics, checked with hypothesis against independent oracles."""

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from turneval import ToolCall
from turneval.metrics import (
    NonLLMStringSimilarity,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
)
from turneval.metrics.base import run_sync

from .._builders import conversation

# Values chosen to collide under Python == but not as JSON: 1, 1.0, True, "1", nested dicts.
scalars = st.sampled_from([1, 1.0, True, False, 0, "1", "a", None, 2.5])
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xy"), inner, max_size=2)
    ),
    max_leaves=4,
)
calls = st.builds(
    lambda name, args: ToolCall(name=name, args=args),
    st.sampled_from(["a", "b"]),
    st.dictionaries(st.sampled_from(["k", "m"]), values, max_size=2),
)
call_lists = st.lists(calls, max_size=5)

ALL = [
    ToolCallAccuracy(),
    ToolCallAccuracy(strict_order=False),
    ToolCallAccuracy(arg_comparison_metric=NonLLMStringSimilarity()),
    ToolCallF1(),
    ToolCallF1(arg_comparison_metric=NonLLMStringSimilarity(), match_threshold=0.5),
    TrajectoryExactMatch(),
    TrajectoryInOrderMatch(),
    TrajectoryAnyOrderMatch(),
    TrajectoryPrecision(),
    TrajectoryRecall(),
]
PERMUTATION_INVARIANT = [ToolCallAccuracy(strict_order=False), *ALL[3:5], *ALL[7:]]


def json_equal(left: Any, right: Any) -> bool:
    """Independent oracle of JSON value equality."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    return type(left) is type(right) and left == right


def calls_equal(left: ToolCall, right: ToolCall) -> bool:
    return left.name == right.name and json_equal(left.args, right.args)


def same_multiset(left: list[ToolCall], right: list[ToolCall]) -> bool:
    if len(left) != len(right):
        return False
    remaining = list(right)
    for item in left:  # greedy is exact for an equivalence relation
        match = next((i for i, other in enumerate(remaining) if calls_equal(item, other)), None)
        if match is None:
            return False
        remaining.pop(match)
    return True


def score(metric: Any, predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    value: float = run_sync(metric.multi_turn_ascore, conversation(predicted, reference=reference))
    return value


@settings(max_examples=150, deadline=None)
@given(call_lists, call_lists)
def test_scores_are_in_unit_interval(predicted: list[ToolCall], reference: list[ToolCall]) -> None:
    for metric in ALL:
        assert 0.0 <= score(metric, predicted, reference) <= 1.0


@settings(max_examples=100, deadline=None)
@given(call_lists, call_lists, st.randoms(use_true_random=False))
def test_unordered_metrics_are_permutation_invariant(
    predicted: list[ToolCall], reference: list[ToolCall], random: Any
) -> None:
    shuffled_pred, shuffled_ref = list(predicted), list(reference)
    random.shuffle(shuffled_pred)
    random.shuffle(shuffled_ref)
    for metric in PERMUTATION_INVARIANT:
        assert score(metric, predicted, reference) == score(metric, shuffled_pred, shuffled_ref), (
            metric.name
        )


@settings(max_examples=150, deadline=None)
@given(call_lists, call_lists)
def test_exact_implies_in_order_implies_any_order(
    predicted: list[ToolCall], reference: list[ToolCall]
) -> None:
    exact = score(TrajectoryExactMatch(), predicted, reference)
    in_order = score(TrajectoryInOrderMatch(), predicted, reference)
    any_order = score(TrajectoryAnyOrderMatch(), predicted, reference)
    assert exact <= in_order <= any_order


@settings(max_examples=200, deadline=None)
@given(call_lists, call_lists)
def test_f1_is_one_iff_multisets_are_equal(
    predicted: list[ToolCall], reference: list[ToolCall]
) -> None:
    assert (score(ToolCallF1(), predicted, reference) == 1.0) == same_multiset(predicted, reference)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(calls, min_size=1, max_size=4).flatmap(
        lambda ref: st.tuples(st.permutations(ref), st.just(ref))
    )
)
def test_a_permutation_scores_one_on_all_unordered_metrics(
    pair: tuple[list[ToolCall], list[ToolCall]],
) -> None:
    predicted, reference = pair
    for metric in (
        ToolCallF1(),
        TrajectoryAnyOrderMatch(),
        TrajectoryPrecision(),
        TrajectoryRecall(),
    ):
        assert score(metric, list(predicted), reference) == 1.0


def brute_force_matching(edges: set[tuple[int, int]], n_left: int, n_right: int) -> int:
    best = 0
    for size in range(min(n_left, n_right), 0, -1):
        for lefts in itertools.combinations(range(n_left), size):
            for rights in itertools.permutations(range(n_right), size):
                if all(pair in edges for pair in zip(lefts, rights, strict=True)):
                    return size
    return best


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 5).flatmap(
        lambda n_left: st.integers(0, 5).flatmap(
            lambda n_right: st.tuples(
                st.just(n_left),
                st.just(n_right),
                st.sets(
                    st.tuples(
                        st.integers(0, max(n_left - 1, 0)), st.integers(0, max(n_right - 1, 0))
                    )
                ),
            )
        )
    )
)
def test_comparator_matching_is_maximum(graph: tuple[int, int, set[tuple[int, int]]]) -> None:
    n_left, n_right, edges = graph
    edges = {(left, right) for left, right in edges if left < n_left and right < n_right}
    predicted = [ToolCall(name="t", args={"v": f"p{i}"}) for i in range(n_left)]
    reference = [ToolCall(name="t", args={"v": f"r{j}"}) for j in range(n_right)]

    def table(ref: str, pred: str) -> float:
        return float((int(pred[1:]), int(ref[1:])) in edges)

    result = run_sync(
        ToolCallF1(arg_comparison_metric=table).ascore, conversation(predicted, reference=reference)
    )
    matched = [(m["predicted_index"], m["reference_index"]) for m in result.details["matched"]]
    assert len(matched) == brute_force_matching(edges, n_left, n_right)
    assert all(pair in edges for pair in matched)
    assert (
        len({left for left, _ in matched}) == len({right for _, right in matched}) == len(matched)
    )


@settings(max_examples=300, deadline=None)
@given(call_lists, call_lists)
def test_json_matching_count_and_pairs_are_maximum(
    predicted: list[ToolCall], reference: list[ToolCall]
) -> None:
    from turneval.metrics._matching import json_comparison

    comparison = json_comparison(predicted, reference)
    edges = {
        (i, j)
        for i, p in enumerate(predicted)
        for j, r in enumerate(reference)
        if calls_equal(p, r)
    }
    best = brute_force_matching(edges, len(predicted), len(reference))
    pairs = comparison.maximum_matching()
    assert comparison.matched_count() == len(pairs) == best
    assert all(pair in edges for pair in pairs)
    assert len({i for i, _ in pairs}) == len({j for _, j in pairs}) == len(pairs)
    # The pairwise relation agrees with the oracle everywhere.
    for i in range(len(predicted)):
        for j in range(len(reference)):
            assert comparison.equal(i, j) == ((i, j) in edges)
