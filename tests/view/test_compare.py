"""The viewer's compare, from the store's narrow columns, equals ``turneval.compare.compare``.

The viewer never loads two whole runs: it compares :meth:`RunStore.columns`. Whatever two
runs hold (ids or none, repeated ids, failures, votes on both sides of the threshold,
simulated trials), its pairing, means, p-values and changed rows are compare's, and a pair
compare refuses is refused with compare's message.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("sqlalchemy")

from turneval.compare import compare
from turneval.errors import ConfigError
from turneval.results import EvaluationResult
from turneval.results_codec import metric_names
from turneval.store import RunStore
from turneval.view._compare import compare_columns, resamples_for

_VALUES = st.sampled_from([None, "error", 0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 2.0])
_VOTES = st.one_of(
    st.none(), st.tuples(st.sampled_from([0.0, 0.25, 1.0]), st.sampled_from([0.5, 1.0]))
)


@st.composite
def _rows(
    draw: st.DrawFn, count: int, ids: list[str | None], names: list[str]
) -> list[dict[str, Any]]:
    trials = draw(st.booleans())
    records = []
    for index in range(count):
        record: dict[str, Any] = {"index": index}
        if ids[index] is not None:
            record["id"] = ids[index]
        if trials:
            record["scenario_id"] = f"sc{draw(st.integers(0, 2))}"
            record["trial"] = index
        for name in names:
            value = draw(_VALUES)
            record[name] = None if value in (None, "error") else value
            record[f"{name}_reason"] = None if record[name] is None else "r"
            record[f"{name}_error"] = "TimeoutError: slow" if value == "error" else None
            votes = draw(_VOTES)
            if votes is not None and record[name] is not None:
                low, high = votes
                record[f"{name}_details"] = {
                    "repeats": {"min": low, "max": high, "values": [low, high]}
                }
        records.append(record)
    return records


@st.composite
def _runs(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    count = draw(st.integers(1, 9))
    other = draw(st.sampled_from([count] * 8 + [count + 1, max(count - 1, 1)]))
    mode = draw(
        st.sampled_from(
            ["distinct"] * 3 + ["shuffled"] * 3 + ["none", "some", "repeated", "foreign"]
        )
    )
    first: list[str | None] = [f"s{i}" for i in range(count)]
    second: list[str | None] = [f"s{i}" for i in range(other)]
    if mode == "shuffled":
        second = draw(st.permutations(second))
    elif mode == "none":
        first, second = [None] * count, [None] * other
    elif mode == "some":
        first = [sid if draw(st.booleans()) else None for sid in first]
    elif mode == "repeated":
        first = ["same"] * count
    elif mode == "foreign":
        second = [f"t{i}" for i in range(other)]
    names = ["judge", "f1"]
    cand_names = draw(st.sampled_from([names] * 6 + [["judge"], ["other"]]))
    return draw(_rows(count, first, names)), draw(_rows(other, second, cand_names))


def _store_run(store: RunStore, records: list[dict[str, Any]]) -> str:
    names = metric_names(records[0])
    recorder = store.start_run(
        name="run", configs=[{"name": n, "class": None, "config": None} for n in names]
    )
    recorder.names = names
    for record in records:
        recorder.add_record(json.dumps(record), record)
    recorder.finish({"metrics": {}})
    return recorder.run_id


def test_the_viewer_compares_stored_columns_as_compare_compares_rows(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:

        @settings(max_examples=120, deadline=None)
        @given(_runs())
        def check(pair: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
            first, second = pair
            a, b = _store_run(store, first), _store_run(store, second)
            names = (metric_names(first[0]), metric_names(second[0]))
            try:
                expected = compare(
                    EvaluationResult.from_records(store.records(a)),
                    EvaluationResult.from_records(store.records(b)),
                )
            except ConfigError as exc:
                with pytest.raises(ConfigError) as raised:
                    compare_columns(store.columns(a, names[0]), store.columns(b, names[1]), *names)
                assert str(raised.value) == str(exc)
                return
            found = compare_columns(store.columns(a, names[0]), store.columns(b, names[1]), *names)
            # paired as compare pairs: by id or scenario#trial, rows only one run has listed
            assert (found.paired_by, found.rows_only_baseline, found.rows_only_candidate) == (
                expected.paired_by,
                expected.rows_only_baseline,
                expected.rows_only_candidate,
            )
            assert found.pairing_notes() == expected.pairing_notes()
            for position, index in enumerate(found.order):
                paired = store.columns(b, []).indexes[index] if index >= 0 else -1
                assert found.cand_indexes[position] == paired
            assert list(found.metrics) == list(expected.metrics)
            for name, want in expected.metrics.items():
                got = found.metrics[name]
                assert (
                    got.baseline_mean,
                    got.candidate_mean,
                    got.difference,
                    got.p_value,
                    got.pairs,
                    got.regressions,
                    got.improvements,
                    got.newly_failed,
                    got.unstable_regressions,
                    got.flaky_regressions,
                ) == (
                    want.baseline_mean,
                    want.candidate_mean,
                    want.difference,
                    want.p_value,
                    want.pairs,
                    want.regressions,
                    want.improvements,
                    want.newly_failed,
                    want.unstable_regressions,
                    want.flaky_regressions,
                ), name

        check()


def test_large_comparisons_bound_the_permutation_test() -> None:
    assert resamples_for(20_000) == 10_000  # compare's own, up to 20,000 pairs
    assert resamples_for(200_000) == 1_000  # 200 million sign draws at most
    assert resamples_for(10_000_000) == 500  # never fewer than 500 flips


def test_the_compare_page_pairs_by_id_and_names_rows_only_one_run_has(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from turneval.view import create_app

    def rows(ids: list[str], values: list[float]) -> list[dict[str, Any]]:
        return [
            {"index": i, "id": sid, "judge": v, "judge_reason": "r", "judge_error": None}
            for i, (sid, v) in enumerate(zip(ids, values, strict=True))
        ]

    with RunStore(tmp_path / "runs.db") as store:
        # the candidate dropped a, added d, and holds b and c in another order
        base = _store_run(store, rows(["a", "b", "c"], [1.0, 1.0, 0.0]))
        cand = _store_run(store, rows(["c", "b", "d"], [1.0, 0.0, 1.0]))
        page = TestClient(create_app(store)).get(f"/compare?a={base}&b={cand}")
        assert page.status_code == 200, page.text
        text = page.text
        assert "rows paired by id;" in text
        assert "1 baseline row with no row in the candidate, left out: a" in text
        assert "1 candidate row with no row in the baseline, left out: d" in text
        # the figures cover b and c alone: means (1 + 0) / 2 and (0 + 1) / 2, differences -1
        # and +1 (every sign flip has a mean as far from 0: p = 1), 2 pairs
        assert (
            "<tr><td>judge</td><td>0.500</td><td>0.500</td><td>0.000</td><td class='p'>1.0000"
            "</td><td>2</td><td>1</td><td>1</td></tr>"
        ) in text
        # b passed and fails (baseline row 1, candidate row 1); c failed and passes (2 -> 0)
        flips = re.findall(r"<tr class='flip (\w+)'><td>([^<]+)</td>.*?</tr>", text)
        assert flips == [("bad", "regression"), ("good", "improvement")]
        assert f"/runs/{base}/rows/1'" in text and f"/runs/{cand}/rows/1'" in text
        assert f"/runs/{base}/rows/2'" in text and f"/runs/{cand}/rows/0'" in text
        assert f"/runs/{cand}/rows/2'" not in text  # d pairs with nothing
