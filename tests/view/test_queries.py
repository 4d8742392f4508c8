"""The viewer's queries, without HTTP: plain data over a run store, expectations by hand.

One small run serves most tests: six rows of metric ``judge`` with the values
``0.9, failed, 0.2, 0.5, 0.2, 1.0`` (ids ``s0``..``s5``), row 3's votes unstable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy")

from turneval.store import RunStore, StoredRun
from turneval.view import _labeling as labeling
from turneval.view import _queries as queries
from turneval.view import _row_queries as row_queries
from turneval.view._labeling import LabelScale
from turneval.view._row_queries import RowQuery

VALUES: list[float | None] = [0.9, None, 0.2, 0.5, 0.2, 1.0]


def _add_run(
    store: RunStore,
    values: list[Any],
    *,
    name: str = "run",
    dataset: str | None = None,
    metric: str = "judge",
    unstable: tuple[int, ...] = (),
    ids: list[str] | None = None,
    summary: dict[str, Any] | None = None,
    scale: list[Any] | None = None,
) -> StoredRun:
    config: dict[str, Any] = {"name": metric, "class": "Judge", "config": None}
    if scale is not None:
        config["scale"] = scale
    recorder = store.start_run(name=name, dataset_path=dataset, configs=[config])
    recorder.names = [metric]
    for index, value in enumerate(values):
        details: dict[str, Any] = {}
        if index in unstable:
            details["repeats"] = {"votes": [0.0, 1.0], "unstable": True}
        record = {
            "index": index,
            "id": ids[index] if ids else f"s{index}",
            metric: value,
            f"{metric}_reason": None if value is None else f"because {index}",
            f"{metric}_error": "TimeoutError: slow" if value is None else None,
            f"{metric}_details": details,
        }
        sample = {"user_input": [{"type": "human", "content": f"question {index}"}]}
        recorder.add_record(json.dumps(record), record, json.dumps(sample))
    recorder.finish(summary if summary is not None else {"metrics": {}})
    return store.run(recorder.run_id)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore(tmp_path / "runs.db") as opened:
        yield opened


@pytest.fixture
def run(store: RunStore) -> StoredRun:
    return _add_run(store, VALUES, unstable=(3,))


def _indexes(page: row_queries.RowsPage) -> list[int]:
    return [row.index for row in page.rows]


# -- parameters ------------------------------------------------------------------------------


def test_parameters_are_read_as_typed_or_dropped() -> None:
    assert queries.day("2024-05-01") == date(2024, 5, 1)
    assert queries.day("yesterday") is None and queries.day(None) is None
    assert queries.number("1e3") == 1000.0
    assert queries.number("nan") is None and queries.number("inf") is None
    assert queries.number("x") is None and queries.number("") is None
    assert queries.integer("7") == 7 and queries.integer("3.5") is None
    assert queries.whole(4) == 4 and queries.whole(True) == 0 and queries.whole("4") == 0


def test_a_row_query_reads_the_pages_parameters() -> None:
    params = {
        "below": "0.5",
        "min": "x",
        "max": "inf",
        "failed": "1",
        "q": "  refund ",
        "sort": "-value",
        "after": "7",
        "offset": "-3",
    }
    query = RowQuery.of(params, ["judge", "other"])
    assert query == RowQuery(
        metric="judge",  # none asked for: the run's first metric
        failed=True,
        search="refund",
        below=0.5,
        low=None,  # "x" is no number
        high=None,  # inf is no bound
        sort="-value",
        after=7,
        offset=0,  # a negative offset starts at the top
    )
    assert query.filtered and query.by_value
    assert not RowQuery.of({}, []).by_value  # no metric: never sorted by value


# -- runs ------------------------------------------------------------------------------------


def test_runs_listing_filters_and_counts(store: RunStore) -> None:
    _add_run(store, [1.0], name="alpha", dataset="data/a.jsonl", metric="judge")
    _add_run(store, [0.0], name="beta", dataset="data/b.jsonl", metric="tone")
    _add_run(store, [0.5], name="gamma", dataset="data/a.jsonl", metric="judge")
    everything = queries.runs_listing(store, {})
    assert [r.name for r in everything.runs] == ["gamma", "beta", "alpha"]  # newest first
    assert everything.total == 3 and everything.metric_names == ["judge", "tone"]
    judged = queries.runs_listing(store, {"metric": "judge"})
    assert [r.name for r in judged.runs] == ["gamma", "alpha"] and judged.total == 2
    assert judged.metric_names == ["judge"]
    on_a = queries.runs_listing(store, {"dataset": "data/a.jsonl"}, offset=1)
    assert [r.name for r in on_a.runs] == ["alpha"] and on_a.total == 2  # the count: all


def test_summary_lines_keep_what_has_the_expected_shape(store: RunStore) -> None:
    summary = {
        "metrics": {
            "judge": {
                "mean": 0.5,
                "ci_low": 0.25,
                "ci_high": 0.75,
                "count": 4,
                "failed": 1,
                "usage": {"calls": 3, "input_tokens": "many", "output_tokens": True},
                "extra": {"agent:planner": 0.5},
            },
            "tone": "not a metric's summary",
            "latency": {"mean": 1.5},
        }
    }
    run = _add_run(store, [0.5], summary=summary)
    lines, count, extras = queries.summary_lines(run)
    assert [line.name for line in lines] == ["judge", "latency"] and count == 2
    judge = lines[0]
    assert (judge.mean, judge.ci_low, judge.ci_high) == (0.5, 0.25, 0.75)
    assert (judge.count, judge.failed) == (4, 1)
    assert judge.usage == (3, 0, 0)  # a text or a bool never counts as tokens
    assert lines[1].usage is None and lines[1].count == ""  # nothing stored, nothing shown
    assert extras == {"judge": {"agent:planner": 0.5}, "latency": None}


def test_a_run_without_a_dataset_digest_has_no_version(store: RunStore, run: StoredRun) -> None:
    assert queries.dataset_version(store, run) is None
    assert queries.dataset_change(store, run, run) is None
    assert queries.skipped(store, run) == ({}, [])
    assert queries.failure_clusters(store, run) is None  # no FailureAttribution metric


def test_distributions_keep_the_finite_values_and_count_the_others(store: RunStore) -> None:
    run = _add_run(store, [0.5, None, "high", 1.0])
    found = queries.distributions(store, run)
    assert found.values["judge"].tolist() == [0.5, 1.0]  # the failed row and the text out
    assert found.not_numbers == {"judge": 1}
    assert found.simulated is False


# -- rows ------------------------------------------------------------------------------------


def test_rows_sorted_by_value_ties_by_row_index(store: RunStore, run: StoredRun) -> None:
    # values by row: 0: 0.9, 2: 0.2, 3: 0.5, 4: 0.2, 5: 1.0 (row 1 failed: no value)
    up = row_queries.rows_page(store, run, RowQuery("judge", sort="value"))
    assert _indexes(up) == [2, 4, 3, 0, 5] and up.more is None
    assert up.note == "sorted by value: 5 rows have a value"
    down = row_queries.rows_page(store, run, RowQuery("judge", sort="-value"))
    assert _indexes(down) == [5, 0, 3, 2, 4]
    below = RowQuery("judge", sort="-value", below=0.5)
    assert row_queries.value_order(store, run, below).tolist() == [2, 4]
    shaky = RowQuery("judge", sort="value", unstable=True)
    assert row_queries.value_order(store, run, shaky).tolist() == [3]


def test_rows_filtered_on_values_failures_and_votes(store: RunStore, run: StoredRun) -> None:
    def shown(**filters: Any) -> list[int]:
        return _indexes(row_queries.rows_page(store, run, RowQuery("judge", **filters)))

    assert shown() == [0, 1, 2, 3, 4, 5]
    assert shown(below=0.5) == [2, 4]
    assert shown(low=0.5) == [0, 3, 5]
    assert shown(low=0.2, high=0.5) == [2, 3, 4]
    assert shown(failed=True) == [1]
    assert shown(unstable=True) == [3]
    assert shown(after=3) == [4, 5]


def test_rows_pages_follow_on_by_keyset(store: RunStore) -> None:
    run = _add_run(store, [0.5] * 51)  # one more than a page
    first = row_queries.rows_page(store, run, RowQuery("judge"))
    assert _indexes(first) == list(range(50)) and first.more == {"after": 49}
    second = row_queries.rows_page(store, run, RowQuery("judge", after=49))
    assert _indexes(second) == [50] and second.more is None
    by_value = row_queries.rows_page(store, run, RowQuery("judge", sort="value"))
    assert by_value.more == {"offset": 50, "after": None}
    last = row_queries.rows_page(store, run, RowQuery("judge", sort="value", offset=50))
    assert _indexes(last) == [50] and last.more is None


def test_a_filtered_page_stops_reading_at_its_bound(
    store: RunStore, run: StoredRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    # read 2 rows at a time, at most 4 a page: the page after row 3 goes on from there
    monkeypatch.setattr(row_queries, "SCAN", 2)
    monkeypatch.setattr(row_queries, "SCAN_MAX", 4)
    query = RowQuery("judge", low=1.0)  # row 5 alone
    first = row_queries.rows_page(store, run, query)
    assert first.rows == [] and first.more == {"after": 3}
    assert first.note == "read 4 rows for these matches; more may follow"
    page, last, scanned = row_queries.filtered_rows(store, run.id, 3, False, None, query.keeps)
    assert [row.index for row in page] == [5] and last is None and scanned == 2


def test_a_rows_text_is_found_by_its_path(store: RunStore, run: StoredRun) -> None:
    row = row_queries.row(store, run.id, 2)
    assert row is not None and row_queries.row(store, run.id, 9) is None
    assert row_queries.row_text(store, run.id, row, ["record", "judge_reason"]) == "because 2"
    path = ["sample", "user_input", 0, "content"]
    assert row_queries.row_text(store, run.id, row, path) == "question 2"
    whole = row_queries.row_text(store, run.id, row, ["sample", "user_input", 0])
    assert json.loads(whole) == {"type": "human", "content": "question 2"}  # not a str: JSON
    for wrong in (["record", "nope"], ["sample", "user_input", 5], ["sample", "user_input", True]):
        with pytest.raises(LookupError, match="row 2 of run"):
            row_queries.row_text(store, run.id, row, wrong)


def test_lower_is_better_only_for_costs() -> None:
    assert row_queries.lower_is_better("turn_latency")  # a built-in cost: seconds
    assert row_queries.lower_is_better("conversation_cost")
    assert not row_queries.lower_is_better("tool_call_f1")
    assert not row_queries.lower_is_better("a_name_no_metric_has")  # unknown: a score


# -- compare ---------------------------------------------------------------------------------


def test_two_runs_compared_from_their_columns(store: RunStore) -> None:
    base = _add_run(store, [1.0, 1.0, 0.0, 0.0], name="base")
    cand = _add_run(store, [1.0, 0.0, 0.0, 1.0], name="cand")
    assert queries.config_problem(base, cand) is None
    found = queries.compared(store, base, cand)
    change = found.metrics["judge"]
    assert (change.baseline_mean, change.candidate_mean, change.difference) == (0.5, 0.5, 0.0)
    assert change.pairs == 4 and found.paired_by == "id"
    # row s1 fell under the 0.5 bar, row s3 rose over it: the regression listed first
    assert found.flips == [("regression", "judge", 1), ("improvement", "judge", 3)]
    assert [found.base_ids[p] for _, _, p in found.flips] == ["s1", "s3"]


def test_runs_configured_otherwise_do_not_compare(store: RunStore) -> None:
    base = _add_run(store, [1.0], name="base")
    recorder = store.start_run(
        name="other", configs=[{"name": "judge", "class": "Judge", "config": {"strict": True}}]
    )
    recorder.finish({"metrics": {}})
    problem = queries.config_problem(base, store.run(recorder.run_id))
    assert problem is not None and "judge" in problem


def test_compare_choices_add_the_runs_asked_for(store: RunStore) -> None:
    runs = [_add_run(store, [1.0], name=f"r{n}") for n in range(3)]
    listed = queries.compare_choices(store, (runs[0].id, "missing"), store.run)
    # run r0 is among the latest already: listed once; an unknown id is left out
    assert [r.name for r in listed] == ["r2", "r1", "r0"]


# -- labeling --------------------------------------------------------------------------------


def test_label_values_read_numbers_bools_and_words() -> None:
    assert labeling.label_value(True) == 1.0 and labeling.label_value(3) == 3.0
    assert labeling.label_value("Yes") == 1.0 and labeling.label_value("FAIL") == 0.0
    assert labeling.label_value("maybe") is None and labeling.label_value(None) is None


def test_disagreements_and_unstable_rows_come_first(store: RunStore, run: StoredRun) -> None:
    store.add_label(metric="judge", label=0, run_id=run.id, row_index=0)  # 0.9: disagrees
    store.add_label(metric="judge", label="no", run_id=run.id, row_index=2)  # 0.2: agrees
    store.add_label(metric="judge", label=1, run_id=run.id, row_index=5)  # 1.0: agrees
    store.add_label(metric="judge", label=1, run_id=run.id, row_index=1)  # failed: no value
    # disagreeing row 0 and unstable row 3 first, then the others in row order
    assert labeling.disagreement_queue(store, run, "judge") == [0, 3, 1, 2, 4, 5]


def test_a_random_queue_is_the_seeds(store: RunStore, run: StoredRun) -> None:
    assert labeling.random_queue(run, 1) == [0, 1, 2, 3, 4, 5]  # fewer rows than a queue
    large = _add_run(store, [0.5] * 60)
    drawn = labeling.random_queue(large, 7)
    assert len(drawn) == labeling.QUEUE == 50 and drawn == sorted(set(drawn))
    assert drawn == labeling.random_queue(large, 7) != labeling.random_queue(large, 8)


def test_a_queue_row_by_position(store: RunStore, run: StoredRun) -> None:
    row, total, place = labeling.queue_row(store, run, 2, None)  # all rows, by keyset
    assert row is not None and (row.index, total, place) == (2, 6, 2)
    assert labeling.queue_row(store, run, 6, None) == (None, 6, 6)
    row, total, place = labeling.queue_row(store, run, 1, [5, 3])
    assert row is not None and (row.index, total, place) == (3, 2, 1)
    assert labeling.queue_row(store, run, 2, [5, 3]) == (None, 2, 2)


def test_a_declared_scale_is_two_or_more_finite_numbers() -> None:
    assert labeling.declared_scale({"scale": [1, 0, 1]}) == (0.0, 1.0)
    for wrong in ([1], [0, True], [0, math.inf], "0,1", None):
        assert labeling.declared_scale({"scale": wrong}) is None
    assert labeling.declared_scale("not a record") is None


def test_a_scale_names_its_keys_and_refuses_labels_off_it(store: RunStore) -> None:
    yes_no = LabelScale("accept", (0.0, 1.0))
    assert yes_no.keys() == {"0": 0.0, "1": 1.0}
    assert yes_no.allowed() == "0 (no) or 1 (yes)"
    assert yes_no.problem(1) is None and yes_no.problem("yes") is None
    assert yes_no.problem(3) == "label 3 is not on the scale of 'accept': 0 (no) or 1 (yes)"
    assert yes_no.problem("maybe") == (
        "label 'maybe' is not a score or a known word; 'accept' takes 0 (no) or 1 (yes)"
    )
    halves = LabelScale("m", (0.0, 0.5, 1.0))
    assert halves.keys() == {"1": 0.0, "2": 0.5, "3": 1.0}  # not digits: keys in order
    assert halves.allowed() == "0, 0.5 or 1"
    anything = LabelScale("m", None)
    assert list(anything.keys()) == [str(d) for d in range(10)]
    declared = _add_run(store, [1.0], metric="accept", scale=[0, 1])
    assert labeling.scale_of(declared, "accept").points == (0.0, 1.0)
    assert labeling.scale_of(declared, "nothing").points is None
