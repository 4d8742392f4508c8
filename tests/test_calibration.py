import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import BaseMessage
from scipy import stats
from sklearn.metrics import (
    balanced_accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
)

from turneval import ConfigError, SingleTurnSample, evaluate
from turneval.calibration import (
    AgreementReport,
    AlignedMetric,
    Label,
    agreement,
    align,
    krippendorff_alpha,
    render_agreement_html,
)
from turneval.cli import main
from turneval.metrics import Fluency, ToolCallF1
from turneval.results import EvaluationResult, MetricFailure, MetricResult, SampleResult
from turneval.testing import ScriptedChatModel

from ._fakes import text_of

HUMAN_BINARY = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
JUDGE_BINARY = [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1]
HUMAN_SCALE = [1, 2, 3, 4, 5, 3, 2, 4, 5, 1]
JUDGE_SCALE = [2, 2, 3, 5, 5, 4, 2, 4, 4, 1]


def result_of(name: str, values: Sequence[float | None]) -> EvaluationResult:
    rows = []
    for index, value in enumerate(values):
        row = SampleResult(index, None)
        if value is None:
            row.failures[name] = MetricFailure(name, index, "JudgeOutputError", "bad")
        else:
            row.results[name] = MetricResult(name, float(value))
        rows.append(row)
    return EvaluationResult(rows, [name])


def test_confusion_matrix_columns_stay_apart_with_long_labels() -> None:
    # the mean of three votes: 1/3 and 2/3 are written 0.333333 and 0.666667
    report = agreement(result_of("knowledge_retention", [1 / 3, 2 / 3, 1.0]), [0, 1, 1])
    lines = str(report).splitlines()
    header = lines.index("  confusion (rows: human, columns: judge)") + 1
    assert lines[header].split() == ["0", "0.333333", "0.666667", "1"]
    assert lines[header + 1].split() == ["0", "0", "1", "0", "0"]


def test_binary_statistics_by_hand_and_equal_to_scikit_learn() -> None:
    report = agreement(result_of("judge", JUDGE_BINARY), HUMAN_BINARY)
    # Confusion (rows human 0/1, columns judge 0/1): human 0 -> judge 0,0,1,0,1; human 1 -> six 1s
    # and one 0. Agreement 9/12; chance p_e = 5/12*4/12 + 7/12*8/12 = 76/144;
    # kappa = (108/144 - 76/144) / (68/144) = 8/17.
    assert report.confusion == ((3, 2), (1, 6))
    assert report.n == 12 and report.scale == (0.0, 1.0) and not report.ordinal
    assert report.agreement == pytest.approx(9 / 12)
    assert report.kappa == pytest.approx(8 / 17)
    assert report.balanced_accuracy == pytest.approx((3 / 5 + 6 / 7) / 2)
    assert report.mean_bias == pytest.approx((8 - 7) / 12)
    assert report.per_class["1"].precision == pytest.approx(6 / 8)
    assert report.per_class["1"].recall == pytest.approx(6 / 7)
    assert report.per_class["0"].precision == pytest.approx(3 / 4)
    assert report.per_class["0"].f1 == pytest.approx(2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5))
    assert report.per_class["0"].support == 5
    assert report.weighted_kappa is None and report.spearman is None
    # and the same as scikit-learn's
    assert report.kappa == pytest.approx(cohen_kappa_score(HUMAN_BINARY, JUDGE_BINARY))
    assert report.balanced_accuracy == pytest.approx(
        balanced_accuracy_score(HUMAN_BINARY, JUDGE_BINARY)
    )
    assert report.confusion == tuple(map(tuple, confusion_matrix(HUMAN_BINARY, JUDGE_BINARY)))
    # two raters, nominal: alpha also from Krippendorff's package, via our wrapper
    assert report.alpha == pytest.approx(krippendorff_alpha([HUMAN_BINARY, JUDGE_BINARY]))
    # read back from its JSON form: every statistic, the per-class scores and the intervals
    assert report.agreement_ci is not None and report.kappa_ci is not None
    assert AgreementReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_ordinal_statistics_equal_scikit_learn_and_scipy() -> None:
    report = agreement(result_of("fluency", JUDGE_SCALE), HUMAN_SCALE)
    assert report.scale == (1.0, 2.0, 3.0, 4.0, 5.0) and report.ordinal
    assert report.agreement == pytest.approx(6 / 10)
    assert report.mean_bias == pytest.approx((32 - 30) / 10)
    # quadratic-weighted kappa by its formula: 1 - sum(w * observed) / sum(w * expected)
    observed = np.zeros((5, 5))
    for h, j in zip(HUMAN_SCALE, JUDGE_SCALE, strict=True):
        observed[h - 1, j - 1] += 1
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    weights = np.array([[(i - j) ** 2 for j in range(5)] for i in range(5)])
    by_hand = 1 - (weights * observed).sum() / (weights * expected).sum()
    assert report.weighted_kappa == pytest.approx(by_hand)
    assert report.weighted_kappa == pytest.approx(
        cohen_kappa_score(HUMAN_SCALE, JUDGE_SCALE, weights="quadratic")
    )
    assert report.kappa == pytest.approx(cohen_kappa_score(HUMAN_SCALE, JUDGE_SCALE))
    assert report.spearman == pytest.approx(stats.spearmanr(HUMAN_SCALE, JUDGE_SCALE).statistic)
    assert report.kendall == pytest.approx(stats.kendalltau(HUMAN_SCALE, JUDGE_SCALE).statistic)
    assert report.confusion == tuple(
        map(tuple, confusion_matrix(HUMAN_SCALE, JUDGE_SCALE, labels=[1, 2, 3, 4, 5]))
    )
    assert report.per_class == {}
    # bootstrap intervals: seeded, and they contain the point estimates
    low, high = report.weighted_kappa_ci or (math.nan, math.nan)
    assert report.weighted_kappa is not None and low <= report.weighted_kappa <= high
    low, high = report.agreement_ci or (math.nan, math.nan)
    assert low <= report.agreement <= high and 0 <= low and high <= 1
    again = agreement(result_of("fluency", JUDGE_SCALE), HUMAN_SCALE)
    assert again.kappa_ci == report.kappa_ci
    text = str(report)
    assert "weighted kappa" in text and "rows: human, columns: judge" in text


def _group(pattern: str, text: str) -> str:
    """The first group of ``pattern``'s match in ``text``, which must match."""
    match = re.search(pattern, text)
    assert match is not None, f"{pattern!r} not in {text!r}"
    return match.group(1)


def biased_judge(prompts: list[list[BaseMessage]]) -> ScriptedChatModel:
    """Rates one point above the truth (``#i# true=N`` in the answer), at most 5; with worked
    examples in its system prompt, rates the truth."""

    def policy(messages: list[BaseMessage]) -> str:
        question = text_of(messages[-1]).split("# The case to judge")[-1]
        truth = int(_group(r"true=(\d)", question))
        taught = "# Worked examples" in text_of(messages[-1])
        prompts.append(messages)
        score = truth if taught else min(truth + 1, 5)
        return json.dumps({"explanation": "e", "score": score})

    return ScriptedChatModel(responses=[policy])


def sample(i: int, truth: int) -> SingleTurnSample:
    return SingleTurnSample(user_input="Say hello.", response=f"hello #{i}# true={truth}")


def test_a_judge_with_a_known_bias_shows_the_expected_confusion() -> None:
    truths = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
    result = evaluate([sample(i, t) for i, t in enumerate(truths)], [Fluency(llm=biased_judge([]))])
    report = agreement(result, truths)  # a column, one label per row
    assert report.confusion == (
        (0, 2, 0, 0, 0),
        (0, 0, 2, 0, 0),
        (0, 0, 0, 2, 0),
        (0, 0, 0, 0, 2),
        (0, 0, 0, 0, 2),
    )
    assert report.agreement == pytest.approx(2 / 10) and report.mean_bias == pytest.approx(8 / 10)
    assert report.spearman is not None and report.spearman > 0.9  # ranks kept, values shifted


def test_label_forms_ids_and_skipped_failures(tmp_path: Path) -> None:
    result = result_of("judge", [1, 0, None, 1])
    import pandas as pd

    column = agreement(result, pd.Series([1.0, math.nan, 0.0, 1.0]))  # NaN: not labeled
    assert column.n == 2 and column.skipped == 1 and column.confusion == ((0, 0), (0, 2))
    by_index = agreement(result, {0: "yes", 1: "no", 2: True, 3: "pass"})
    assert by_index.n == 3 and by_index.skipped == 1 and by_index.agreement == 1.0
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"index": 0, "metric": "judge", "label": 0}\n\n'
        '{"index": 3, "metric": "judge", "label": 1}\n'
        '{"index": 3, "metric": "other", "label": 0}\n'
    )
    from_file = agreement(result, path)
    assert from_file.n == 2 and from_file.confusion == ((0, 1), (0, 1))
    rows = evaluate(
        [
            SingleTurnSample(user_input="q", response="a", metadata={"id": "first"}),
            SingleTurnSample(user_input="q", response="b", metadata={"id": "second"}),
        ],
        [Fluency(llm=ScriptedChatModel(responses=['{"explanation": "e", "score": 4}']))],
    )
    report = agreement(rows, [Label("second", 5.0), Label("first", 4.0)], "fluency")
    assert report.confusion[3][3] == 1 and report.confusion[4][3] == 1
    # The ids travel in results.jsonl ("id" after "index"): labels by id work on a file too.
    saved = tmp_path / "results.jsonl"
    rows.to_jsonl(saved)
    assert [json.loads(line)["id"] for line in saved.read_text().splitlines()] == [
        "first",
        "second",
    ]
    back = agreement(EvaluationResult.from_jsonl(saved), [Label("second", 5.0)], "fluency")
    assert back.n == 1 and back.confusion[4][3] == 1
    labels = tmp_path / "by_id.jsonl"
    labels.write_text('{"id": "first", "metric": "fluency", "label": 4}\n')
    assert main(["calibrate", str(saved), str(labels), "--html", str(tmp_path / "c.html")]) == 0


def test_bad_labels_name_the_line_the_row_or_the_metric(tmp_path: Path) -> None:
    result = result_of("fluency", [3, 4, 5])
    path = tmp_path / "labels.jsonl"
    path.write_text('{"index": 0, "label": 3}\n{"index": 1, "label": 7}\n')
    with pytest.raises(ConfigError, match=r"labels.jsonl line 2: label 7 is outside the scale"):
        agreement(result, path)
    path.write_text('{"index": 0, "label": 3}\n{"index": 9, "label": 4}\n')
    with pytest.raises(ConfigError, match=r"line 2: row index 9 is unknown; .* rows 0-2"):
        agreement(result, path)
    path.write_text('{"index": 0, "label": 3}\n{"index": 0, "label": 4}\n')
    with pytest.raises(
        ConfigError, match=r"line 2: row 0 .* already labeled \(labels.jsonl line 1"
    ):
        agreement(result, path)
    path.write_text('{"index": 0, "label": "great"}\n')
    with pytest.raises(ConfigError, match=r"line 1: label 'great' is not a score"):
        agreement(result, path)
    path.write_text('{"label": 3}\n')
    with pytest.raises(ConfigError, match=r"line 1: needs an integer 'index' or a string 'id'"):
        agreement(result, path)
    path.write_text("{oops\n")
    with pytest.raises(ConfigError, match=r"line 1: not JSON"):
        agreement(result, path)
    with pytest.raises(ConfigError, match=r"no row has sample id 'x' \(the rows carry no"):
        agreement(result, {"x": 3})
    with pytest.raises(ConfigError, match=r"one label \(or None\) per row: got 2 labels for 3"):
        agreement(result, [3, 4])
    with pytest.raises(ConfigError, match=r"'tool_call_f1' is not judged by an LLM"):
        agreement(result_of("tool_call_f1", [1.0]), [1.0])
    with pytest.raises(ConfigError, match=r"metric 'nope' is not in the results"):
        agreement(result, [3, 4, 5], "nope")


def test_krippendorff_alpha_on_the_published_worked_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four
    # observers, twelve units, missing values; alpha = 0.743 (nominal), 0.849 (interval).
    nan = None
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
    assert krippendorff_alpha(data) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, level="interval") == pytest.approx(0.849, abs=5e-4)
    with pytest.raises(ConfigError, match="at least two raters"):
        krippendorff_alpha([[1, 2]])
    with pytest.raises(ConfigError, match="one value per unit"):
        krippendorff_alpha([[1, 2], [1]])
    with pytest.raises(ConfigError, match="rated by at least two raters"):
        krippendorff_alpha([[1, None], [None, 2]])


def test_align_shows_training_examples_and_scores_only_the_held_out_split(tmp_path: Path) -> None:
    truths = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
    labeled = [(sample(i, t), t) for i, t in enumerate(truths)]
    prompts: list[list[BaseMessage]] = []
    aligned = align(Fluency(llm=biased_judge(prompts)), labeled, k=8, split=0.5, seed=3)
    assert sorted(aligned.train + aligned.held_out) == list(range(12))
    assert len(aligned.held_out) == 6 and set(aligned.shown) <= set(aligned.train)
    assert len(aligned.shown) == 6  # k=8, but only 6 training examples
    # the prompts, as recorded: no example is ever scored by a judge that was shown it
    taught = [text_of(m[-1]) for m in prompts if "# Worked examples" in text_of(m[-1])]
    assert len(taught) == 6
    for prompt in taught:
        examples, question = prompt.split("# The case to judge")
        shown = {int(i) for i in re.findall(r"#(\d+)#", examples)}
        scored = int(_group(r"#(\d+)#", question))
        assert shown == set(aligned.shown) and scored not in shown
        assert scored in aligned.held_out
    before, after = aligned.before, aligned.after
    assert before is not None and after is not None and before.n == after.n == 6
    held_truths = [truths[i] for i in aligned.held_out]
    assert before.agreement == pytest.approx(held_truths.count(5) / 6)  # only 5 survives +1
    assert after.agreement == 1.0 and after.mean_bias == 0.0
    # save and load: examples and reports come back
    path = tmp_path / "aligned.json"
    aligned.save(path)
    loaded = AlignedMetric.load(path, llm=biased_judge([]))
    assert loaded.metric.examples == aligned.metric.examples and loaded.after == after
    assert loaded.shown == aligned.shown
    rescored = evaluate([sample(99, 3)], [loaded.metric])
    assert rescored.rows[0].results["fluency"].value == 3.0  # taught: no bias


def test_align_picks_disagreements_first_balanced_over_labels() -> None:
    truths = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2]
    labeled = [(sample(i, t), t) for i, t in enumerate(truths)]
    aligned = align(Fluency(llm=biased_judge([])), labeled, k=3, split=0.5, seed=3)
    picked = [truths[i] for i in aligned.shown]
    train_labels = {truths[i] for i in aligned.train if truths[i] != 5}
    assert len(picked) == 3 and 5 not in picked  # label 5 is the only one the judge gets right
    assert len(set(picked)) == min(3, len(train_labels))  # one per label before any repeats


def test_align_bad_input() -> None:
    judge = biased_judge([])
    nine = [(sample(i, 3), 3) for i in range(9)]
    with pytest.raises(ConfigError, match=r"at least 10 labeled examples of 'fluency', got 9"):
        align(Fluency(llm=judge), nine)
    with pytest.raises(ConfigError, match=r"'tool_call_f1' is not judged by an LLM"):
        align(ToolCallF1(), nine)
    off = [(sample(i, 3), 3) for i in range(10)]
    off[4] = (sample(4, 3), 7)
    with pytest.raises(ConfigError, match=r"labeled example 4: label 7 is outside the scale"):
        align(Fluency(llm=judge), off)
    with pytest.raises(ConfigError, match=r"labeled example 0: expected \(sample, label\)"):
        align(Fluency(llm=judge), [sample(0, 3)] * 10)
    with pytest.raises(ConfigError, match="split"):
        align(Fluency(llm=judge), off[:4] + off[5:] + off[:1], split=1.0)


def test_cli_calibrate_prints_the_report_and_writes_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    result_of("fluency", JUDGE_SCALE).to_jsonl(results)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(
            json.dumps({"index": i, "metric": "fluency", "label": v}) + "\n"
            for i, v in enumerate(HUMAN_SCALE)
        )
    )
    assert main(["calibrate", str(results), str(labels)]) == 0
    out = capsys.readouterr().out
    expected = cohen_kappa_score(HUMAN_SCALE, JUDGE_SCALE, weights="quadratic")
    assert f"weighted kappa     {expected:.3f}  95% CI [" in out
    page = (tmp_path / "calibration.html").read_text()
    assert 'id="confusion"' in page and f"weighted kappa = {expected:.3f}" in page
    (tmp_path / "calibration.html").unlink()
    assert main(["calibrate", str(tmp_path), str(labels)]) == 0  # the run's folder works too
    assert f"weighted kappa     {expected:.3f}" in capsys.readouterr().out
    assert (tmp_path / "calibration.html").is_file()  # beside its results.jsonl
    labels.write_text('{"index": 0, "metric": "fluency", "label": 9}\n')
    assert main(["calibrate", str(results), str(labels), "--html", str(tmp_path / "x.html")]) == 2
    assert "labels.jsonl line 1: label 9 is outside the scale" in capsys.readouterr().err


def test_html_escapes_the_metric_name() -> None:
    report = agreement(result_of("<b>j</b>", JUDGE_BINARY), HUMAN_BINARY)
    page = render_agreement_html(report)
    assert "<b>j</b>" not in page and "&lt;b&gt;j&lt;/b&gt;" in page
    assert "class 1: precision / recall / F1" in page


def test_bootstrap_kappas_equal_scikit_learn_on_every_resample() -> None:
    from turneval.calibration._statistics import resampled_kappas

    human, judge = np.array(HUMAN_SCALE) - 1, np.array(JUDGE_SCALE) - 1
    picks = np.random.default_rng(0).integers(0, len(human), size=(50, len(human)))
    for weights in (None, "quadratic"):
        ours = resampled_kappas(human[picks], judge[picks], 5, weights)
        for pick, value in zip(picks, ours, strict=True):
            theirs = cohen_kappa_score(human[pick], judge[pick], labels=range(5), weights=weights)
            assert value == pytest.approx(theirs)
    one_class = np.zeros((1, 4), dtype=int)  # one class in both: undefined, NaN
    assert np.isnan(resampled_kappas(one_class, one_class, 2, None))


def test_which_metric_and_more_bad_input(tmp_path: Path) -> None:
    both = EvaluationResult(
        [SampleResult(0, None, {"a": MetricResult("a", 1.0), "b": MetricResult("b", 0.0)})],
        ["a", "b"],
    )
    with pytest.raises(
        ConfigError, match=r"which metric\? pass metric=\.\.\. \(one of \['a', 'b'\]"
    ):
        agreement(both, [1.0])
    picked = agreement(both, [Label(0, 0.0, "b")])  # the labels name the metric
    assert picked.metric == "b" and picked.agreement == 1.0 and picked.agreement_ci is None
    with pytest.raises(ConfigError, match=r"no labeled row of 'a' has a judge score"):
        agreement(result_of("a", [None]), [1.0])
    with pytest.raises(ConfigError, match="takes 21 distinct values; agreement needs a discrete"):
        agreement(result_of("a", [i / 20 for i in range(21)]), [0.0] * 21)
    with pytest.raises(ConfigError, match=r"row 0: the judge's 'fluency' score 3.5 is not on"):
        agreement(result_of("fluency", [3.5]), [3])
    with pytest.raises(ConfigError, match="labels must be a column"):
        agreement(both, 3)
    with pytest.raises(ConfigError, match=r"label for row 0: label nan is not a score"):
        agreement(result_of("a", [1.0]), {0: math.nan})
    path = tmp_path / "labels.jsonl"
    for line, message in [
        ("[1]", "line 1: expected an object"),
        ('{"index": 0}', "line 1: has no 'label'"),
        ('{"index": 0, "label": 1, "metric": 3}', "line 1: 'metric' must be a metric name"),
    ]:
        path.write_text(line + "\n")
        with pytest.raises(ConfigError, match=message):
            agreement(result_of("a", [1.0]), path)
    with pytest.raises(ConfigError, match="only judged metrics align|is not judged"):
        align(object(), [])
    labeled = [(sample(i, 3), 3) for i in range(10)]
    with pytest.raises(ConfigError, match="k is the number of examples"):
        align(Fluency(llm=biased_judge([])), labeled, k=0)
    path = tmp_path / "aligned.json"
    path.write_text(json.dumps({"metric_class": "os.path.join", "config": {}}))
    with pytest.raises(ConfigError, match=r"metric class os.path.join: not a class"):
        AlignedMetric.load(path)
    path.write_text(json.dumps({"metric_class": "not_imported_mod.Judge", "config": {}}))
    with pytest.raises(ConfigError, match="not_imported_mod is not imported, and a run file"):
        AlignedMetric.load(path)  # a file never makes turneval import a module of its choosing
    path.write_text(json.dumps({"metric_class": "turneval.metrics.ToolCallF1", "config": {}}))
    with pytest.raises(ConfigError, match="is not a judged metric class"):
        AlignedMetric.load(path)


def test_verdict_text_speaks_the_metric_scale() -> None:
    from turneval.calibration import verdict_text
    from turneval.metrics import AgentGoalAccuracyWithReference, PairwiseMetric

    assert verdict_text(Fluency(), 4.0, "clear") == "score 4 (somewhat fluent): clear"
    assert verdict_text(AgentGoalAccuracyWithReference(), 0.0) == "0 (no)"
    assert verdict_text(PairwiseMetric(name="p", criteria="c"), 0.5).startswith("TIE")
    assert verdict_text(PairwiseMetric(name="p", criteria="c"), 1.0).startswith("CANDIDATE")


def test_the_bootstrap_draws_in_bounded_chunks_with_the_same_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    whole = agreement(result_of("fluency", JUDGE_SCALE), HUMAN_SCALE)
    monkeypatch.setattr(
        "turneval.calibration._statistics._BOOTSTRAP_CELLS", 30
    )  # 3 resamples at a time
    chunked = agreement(result_of("fluency", JUDGE_SCALE), HUMAN_SCALE)
    assert chunked == whole


def test_numpy_and_nullable_pandas_label_columns_and_numpy_row_keys() -> None:
    import pandas as pd

    result = result_of("fluency", JUDGE_SCALE)
    expected = agreement(result, HUMAN_SCALE)
    # A numpy integer array, an int64 Series and a nullable Int64 Series (pd.NA: unlabeled) are
    # columns like a list; a DataFrame index gives numpy integer keys, which are row indices.
    assert agreement(result, np.array(HUMAN_SCALE)) == expected
    assert agreement(result, pd.Series(HUMAN_SCALE, dtype="int64")) == expected
    nullable = agreement(result, pd.Series([*HUMAN_SCALE[:-1], None], dtype="Int64"))
    assert nullable.n == len(HUMAN_SCALE) - 1 and nullable.confusion[0][0] == 0
    keyed = agreement(result, {np.int64(i): np.int64(v) for i, v in enumerate(HUMAN_SCALE)})
    assert keyed == expected


def test_labels_of_another_metric_only_are_named_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"index": 0, "metric": "flency", "label": 3}\n')
    with pytest.raises(ConfigError, match=r"other metrics only: 'flency' \(1\)"):
        agreement(result_of("fluency", [3, 4]), path, "fluency")
    with pytest.raises(ConfigError, match=r"the judge failed on all 1 labeled rows"):
        agreement(result_of("fluency", [None, 4]), {0: 3}, "fluency")


def test_a_sample_id_shared_by_several_rows_is_ambiguous() -> None:
    rows = []
    for index, (sample_id, value) in enumerate([("a", 3.0), ("b", 4.0), ("a", 5.0)]):
        row = SampleResult(index, None, stored_id=sample_id)
        row.results["fluency"] = MetricResult("fluency", value)
        rows.append(row)
    result = EvaluationResult(rows, ["fluency"])
    with pytest.raises(ConfigError, match=r"sample id 'a' names rows 0, 2: label them by index"):
        agreement(result, {"a": 3}, "fluency")
    assert agreement(result, {"b": 4, 2: 5}, "fluency").agreement == 1.0


def test_a_labels_file_written_by_pandas_null_labels_and_float_indices(tmp_path: Path) -> None:
    import pandas as pd

    result = result_of("fluency", JUDGE_SCALE)
    frame = pd.DataFrame({"index": range(len(HUMAN_SCALE)), "label": HUMAN_SCALE})
    frame.loc[len(frame)] = [math.nan, math.nan]  # a row nobody filled in: index 10.0 -> null
    frame.loc[0, "label"] = math.nan  # row 0 not labeled
    path = tmp_path / "labels.jsonl"
    frame.to_json(path, orient="records", lines=True)  # index 0.0, 1.0, ...; NaN -> null
    assert '"index":1.0' in path.read_text() and '"label":null' in path.read_text()
    report = agreement(result, path, "fluency")
    assert report == agreement(result, [None, *HUMAN_SCALE[1:]])


@pytest.mark.parametrize("bad", ["7", "2", "-1", "0.5"])
def test_cli_calibrate_refuses_labels_off_a_yes_no_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    results = tmp_path / "results.jsonl"
    result_of("correctness", JUDGE_BINARY).to_jsonl(results)
    labels = tmp_path / "labels.jsonl"
    lines = [json.dumps({"index": i, "label": v}) for i, v in enumerate(HUMAN_BINARY)]
    lines[3] = f'{{"index": 3, "label": {bad}}}'
    labels.write_text("\n".join(lines) + "\n")
    assert main(["calibrate", str(results), str(labels), "--metric", "correctness"]) == 2
    err = capsys.readouterr().err
    assert f"labels.jsonl line 4: label {float(bad):g} is outside the scale of 'correctness'" in err
    assert "(a yes/no judge: 0 or no, 1 or yes)" in err
    lines[3] = '{"index": 3, "label": "yes"}'  # words and 0/1 are its values
    labels.write_text("\n".join(lines) + "\n")
    assert main(["calibrate", str(results), str(labels), "--metric", "correctness"]) == 0


def test_the_yes_no_judges_know_their_scale() -> None:
    from turneval.calibration._scales import scale_of
    from turneval.metrics import (
        AgentGoalAccuracyWithReference,
        ChunkRelevance,
        Correctness,
        GuidelineAdherence,
        TrajectoryJudge,
    )

    for yes_no in (
        Correctness,
        GuidelineAdherence,
        AgentGoalAccuracyWithReference,
        TrajectoryJudge,
    ):
        assert scale_of(yes_no) == (0.0, 1.0)
    assert scale_of(ChunkRelevance) is None  # a share of the chunks: any value in [0, 1]
    assert scale_of(Fluency) == (1.0, 2.0, 3.0, 4.0, 5.0)


def test_a_repeats_run_is_calibrated_on_the_judges_own_scale(tmp_path: Path) -> None:
    from turneval.metrics import TrajectoryJudge
    from turneval.metrics._votes import Voted, combine_votes

    # A rubric judge asked 3 times: the row holds the mean of its votes; calibration compares
    # the scale point nearest that mean (4.667 -> 5, 2.333 -> 2, 3.5 -> 3: ties go down).
    votes = {"hello #0#": [5, 5, 4], "hello #1#": [2, 3, 2], "hello #2#": [3, 4, 4, 3]}
    asked: dict[str, int] = {}

    def answer(messages: list[BaseMessage]) -> str:
        response = next(r for r in votes if r in text_of(messages[-1]))
        asked[response] = asked.get(response, 0) + 1
        return json.dumps({"explanation": "e", "score": votes[response][asked[response] - 1]})

    samples = [SingleTurnSample(user_input="Say hello.", response=r) for r in votes]
    rows = evaluate(samples[:2], [Fluency(llm=ScriptedChatModel(responses=[answer]), repeats=3)])
    assert [row.results["fluency"].value for row in rows.rows] == pytest.approx([14 / 3, 7 / 3])
    report = agreement(rows, [5, 3], "fluency", resamples=20)
    assert report.n == 2 and report.confusion[4][4] == 1 and report.confusion[2][1] == 1
    four = evaluate(samples[2:], [Fluency(llm=ScriptedChatModel(responses=[answer]), repeats=4)])
    assert agreement(four, [3], "fluency", resamples=20).confusion[2][2] == 1
    # A yes/no judge that is not categorical holds the mean (1/3): calibration takes the
    # majority of its votes, also read back from a results file (the CLI's path).
    name = TrajectoryJudge().name
    result = result_of(name, [1, 0])
    result.rows[0].results[name] = MetricResult(
        name,
        1 / 3,
        details=combine_votes(
            [Voted(v, "r", {}) for v in (1.0, 0.0, 0.0)], majority=False, pass_threshold=None
        ).details,
    )
    saved = tmp_path / "results.jsonl"
    result.to_jsonl(saved)
    back = agreement(EvaluationResult.from_jsonl(saved), [0, 0], name, resamples=20)
    assert back.confusion == ((2, 0), (0, 0)) and back.agreement == 1.0
    # a fraction without votes to reduce is still refused
    with pytest.raises(ConfigError, match=r"row 1: the judge's 'trajectory_judge' score 0.5"):
        agreement(result_of(name, [1, 0.5]), [1, 1], name)


def test_a_judge_with_a_declared_scale_refuses_labels_off_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval.calibration._scales import scale_of
    from turneval.metrics import UserFrustration

    assert scale_of(UserFrustration) == (0.0, 0.5, 1.0)  # none / resolved / unresolved
    results = tmp_path / "results.jsonl"
    result_of("user_frustration", [1, 0.5, 0, 1]).to_jsonl(results)
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"index": 0, "label": 1}\n{"index": 1, "label": 7}\n')
    assert main(["calibrate", str(results), str(labels), "--metric", "user_frustration"]) == 2
    err = capsys.readouterr().err
    assert (
        "labels.jsonl line 2: label 7 is outside the scale of 'user_frustration' (0, 0.5, 1)" in err
    )
    labels.write_text(
        '{"index": 0, "label": 1}\n{"index": 1, "label": 0.5}\n{"index": 2, "label": 0.5}\n'
    )
    assert main(["calibrate", str(results), str(labels), "--metric", "user_frustration"]) == 0
    # the three points are the confusion matrix's classes, even those no row uses
    report = agreement(
        result_of("user_frustration", [1, 1]), [1, 1], "user_frustration", resamples=20
    )
    assert report.scale == (0.0, 0.5, 1.0) and report.confusion[2] == (0, 0, 2)
