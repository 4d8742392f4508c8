import itertools
import json
from collections.abc import Mapping
from typing import Protocol

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from turneval import InvalidSampleError, SingleTurnSample
from turneval.metrics import (
    BleuScore,
    RougeScore,
    ToolCallAccuracy,
    ToolCallValid,
    ToolNameMatch,
    ToolParameterKeyMatch,
    ToolParameterKVMatch,
)

from .._builders import call, conversation

CORPUS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("the quick brown fox", "The quick brown fox jumps over the lazy dog."),
    ("", "non-empty reference"),
    ("Running runners ran.\nThey were fast.", "The runner runs.\nShe was quick."),
    ("Hello, world!", "Hello, world!"),
    ("Prices rose 3.5% in 2024; analysts expected 2%.", "In 2024 prices increased by 3.5 percent."),
]


class SingleTurnScorer(Protocol):
    def single_turn_score(self, sample: SingleTurnSample) -> float: ...


def score(metric: SingleTurnScorer, response: str, reference: str) -> float:
    return metric.single_turn_score(SingleTurnSample(response=response, reference=reference))


def test_rouge_by_hand() -> None:
    # rouge1: 2 common unigrams; P = 2/2, R = 2/3, F = 2PR/(P+R) = 0.8.
    assert score(RougeScore(rouge_type="rouge1"), "the cat", "the cat sat") == pytest.approx(0.8)
    # rouge2: bigrams {the cat, cat sat} vs {the cat}: P = 1/1, R = 1/2, F = 2/3.
    assert score(RougeScore(rouge_type="rouge2"), "the cat", "the cat sat") == pytest.approx(2 / 3)
    # rougeL: LCS("a b c d", "a c d") = 3: P = 3/3, R = 3/4, F = 6/7.
    assert score(RougeScore(), "a c d", "a b c d") == pytest.approx(6 / 7)
    # Stemming: "runs" and "running" both stem to "run".
    assert score(RougeScore(rouge_type="rouge1", use_stemmer=True), "runs", "running") == 1.0
    assert score(RougeScore(rouge_type="rouge1"), "runs", "running") == 0.0


def test_bleu_by_hand() -> None:
    # sacrebleu gives 100.00000000000004 here; the score is clipped into [0, 1].
    assert (
        sacrebleu.sentence_bleu("the quick brown fox jumps", ["the quick brown fox jumps"]).score
        > 100
    )
    assert score(BleuScore(), "the quick brown fox jumps", "the quick brown fox jumps") == 1.0
    assert score(BleuScore(), "alpha beta gamma delta", "one two three four") == 0.0


@pytest.mark.parametrize(("response", "reference"), CORPUS)
def test_bleu_equals_sacrebleu(response: str, reference: str) -> None:
    expected = sacrebleu.sentence_bleu(response, [reference]).score / 100
    assert score(BleuScore(), response, reference) == pytest.approx(expected, abs=1e-12)


def punkt_installed() -> bool:
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True


# rougeLsum with split_summaries needs NLTK's punkt_tab data (rouge-score itself fails without it).
COMBINATIONS = [
    (rouge_type, stem, split)
    for rouge_type, stem, split in itertools.product(
        ["rouge1", "rouge2", "rouge5", "rouge9", "rougeL", "rougeLsum"],
        [False, True],
        [False, True],
    )
    if rouge_type != "rougeLsum" or not split or punkt_installed()
]


@pytest.mark.parametrize(("rouge_type", "use_stemmer", "split_summaries"), COMBINATIONS)
def test_rouge_equals_rouge_score(
    rouge_type: str, use_stemmer: bool, split_summaries: bool
) -> None:
    scorer = rouge_scorer.RougeScorer(
        [rouge_type], use_stemmer=use_stemmer, split_summaries=split_summaries
    )
    metric = RougeScore(
        rouge_type=rouge_type, use_stemmer=use_stemmer, split_summaries=split_summaries
    )
    for response, reference in CORPUS:
        expected = scorer.score(reference, response)[rouge_type].fmeasure
        assert score(metric, response, reference) == pytest.approx(expected, abs=1e-12)


def test_options_are_validated_and_reassignable() -> None:
    with pytest.raises(ValueError, match="rouge_type"):
        RougeScore(rouge_type="rouge10")
    metric = RougeScore(rouge_type="rouge1")
    assert score(metric, "the cat", "the cat sat") == pytest.approx(0.8)
    metric.rouge_type = "rouge2"  # the cached scorer is rebuilt
    assert score(metric, "the cat", "the cat sat") == pytest.approx(2 / 3)


def test_text_metrics_as_argument_comparators() -> None:
    sample = conversation(
        [call("search", q="the cat")], reference=[call("search", q="the cat sat")]
    )
    assert ToolCallAccuracy(arg_comparison_metric=RougeScore(rouge_type="rouge1")).multi_turn_score(
        sample
    ) == pytest.approx(0.8)
    assert ToolCallAccuracy(arg_comparison_metric=BleuScore()).multi_turn_score(sample) < 1.0


def instance(*calls: Mapping[str, object], content: str = "", as_string: bool = False) -> str:
    tool_calls: object = list(calls)
    if as_string:
        tool_calls = json.dumps(tool_calls)
    return json.dumps({"content": content, "tool_calls": tool_calls})


def json_score(metric: SingleTurnScorer, response: str, reference: str | None = None) -> float:
    return (
        score(metric, response, reference)
        if reference is not None
        else metric.single_turn_score(SingleTurnSample(response=response))
    )


WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}


def test_valid_and_name_match() -> None:
    good = instance(WEATHER)
    assert json_score(ToolCallValid(), good) == 1.0
    assert json_score(ToolCallValid(), instance()) == 0.0  # no call
    assert json_score(ToolCallValid(), '{"content": "no", "tool_calls": [{"name": ""}]}') == 0.0
    assert json_score(ToolCallValid(), "{broken") == 0.0
    # tool_calls and arguments given as JSON strings (Vertex's wire form).
    wire = instance(
        {"name": "get_weather", "arguments": json.dumps(WEATHER["arguments"])}, as_string=True
    )
    assert (
        json_score(ToolCallValid(), wire) == 1.0 and json_score(ToolNameMatch(), wire, good) == 1.0
    )
    assert json_score(ToolNameMatch(), instance({"name": "get_time", "arguments": {}}), good) == 0.0
    assert json_score(ToolNameMatch(), instance(), instance()) == 1.0
    assert json_score(ToolNameMatch(), instance(WEATHER, WEATHER), good) == 0.0  # an extra call


def test_key_and_kv_match_by_hand() -> None:
    reference = instance(WEATHER)
    prediction = instance(
        {"name": "get_weather", "arguments": {"city": " paris", "days": "3.0", "extra": 1}}
    )
    # keys: city and days of {city, days, units} -> 2/3.
    assert json_score(ToolParameterKeyMatch(), prediction, reference) == pytest.approx(2 / 3)
    # normalised values: " paris" == "Paris", "3.0" == 3 -> 2/3; strict: neither -> 0/3.
    assert json_score(ToolParameterKVMatch(), prediction, reference) == pytest.approx(2 / 3)
    assert (
        json_score(ToolParameterKVMatch(use_strict_string_match=True), prediction, reference) == 0.0
    )
    exact = instance(
        {"name": "get_weather", "arguments": {"units": "metric", "days": 3.0, "city": "Paris"}}
    )
    assert json_score(ToolParameterKVMatch(use_strict_string_match=True), exact, reference) == 1.0


def test_several_calls_are_aligned_by_position() -> None:
    time_call = {"name": "get_time", "arguments": {"tz": "CET"}}
    reference = instance(WEATHER, time_call)
    # Second position missing: (1 + 0) / 2 for keys and key/values.
    result = ToolParameterKeyMatch().single_turn_score(
        SingleTurnSample(response=instance(WEATHER), reference=reference)
    )
    assert result == 0.5
    swapped = instance(time_call, WEATHER)
    assert json_score(ToolParameterKeyMatch(), swapped, reference) == 0.0
    reason = (
        ToolParameterKeyMatch()
        .score(SingleTurnSample(response=instance(WEATHER), reference=reference))
        .reason
    )
    assert reason == "get_weather keys=3/3=1.000; missing call: 0; mean=0.500"


def test_malformed_prediction_scores_zero_with_reason_and_bad_reference_raises() -> None:
    result = ToolParameterKVMatch().score(
        SingleTurnSample(response='{"tool_calls": 3}', reference=instance(WEATHER))
    )
    assert result.value == 0.0 and "'tool_calls' must be a list" in result.reason
    with pytest.raises(
        InvalidSampleError, match="the reference is not tool-call JSON: not valid JSON"
    ):
        ToolNameMatch().score(SingleTurnSample(response=instance(WEATHER), reference="oops"))
    with pytest.raises(InvalidSampleError, match="'reference'"):
        ToolNameMatch().score(SingleTurnSample(response=instance(WEATHER)))


def test_multi_turn_uses_the_last_ai_message_with_calls() -> None:
    sample = conversation(
        [call("get_weather", city="Rome")],
        [call("get_weather", city="Paris", days=3, units="metric")],
        reference=[call("get_weather", city="Paris", days=3, units="metric")],
    )
    assert ToolParameterKVMatch().multi_turn_score(sample) == 1.0
    assert ToolNameMatch().multi_turn_score(sample) == 1.0
    assert ToolCallValid().multi_turn_score(conversation([])) == 0.0


@pytest.mark.skipif(punkt_installed(), reason="NLTK's punkt_tab data is installed here")
def test_sentence_splitting_without_nltk_data_is_a_clear_config_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="punkt_tab data, which is not installed"):
        RougeScore(rouge_type="rougeLsum", split_summaries=True)
    assert (
        RougeScore(rouge_type="rouge1", split_summaries=True).rouge_type == "rouge1"
    )  # ignored there
