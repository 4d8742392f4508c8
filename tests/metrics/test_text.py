import pytest

from turneval import InvalidSampleError, SingleTurnSample
from turneval.metrics import DistanceMeasure, ExactMatch, NonLLMStringSimilarity


async def test_exact_match() -> None:
    assert (
        await ExactMatch().single_turn_ascore(SingleTurnSample(response="a b", reference="a b"))
        == 1.0
    )
    result = await ExactMatch().ascore(SingleTurnSample(response="a b", reference="A b"))
    assert result.value == 0.0 and result.reason == "response differs from reference"


def test_exact_match_sync_wrapper() -> None:
    assert ExactMatch().single_turn_score(SingleTurnSample(response="x", reference="x")) == 1.0


@pytest.mark.parametrize(
    ("measure", "reference", "response", "expected"),
    [
        # Levenshtein: 1 edit over max length 4.
        (DistanceMeasure.LEVENSHTEIN, "kitt", "kite", 1 - 1 / 4),
        # Hamming pads the shorter string: 2 differences over length 5.
        (DistanceMeasure.HAMMING, "abc", "abcde", 1 - 2 / 5),
        # Jaro("MARTHA", "MARHTA") = (6/6 + 6/6 + (6-1)/6)/3 with one transposition.
        (DistanceMeasure.JARO, "MARTHA", "MARHTA", (1 + 1 + 5 / 6) / 3),
        # Indel: delete d + insert e = 2 over total length 8.
        (DistanceMeasure.INDEL, "abcd", "abce", 1 - 2 / 8),
        (DistanceMeasure.TOKEN_SORT_RATIO, "b a", "a b", 1.0),
        (DistanceMeasure.PARTIAL_RATIO, "abc", "xxabcxx", 1.0),
        # No processor: case matters. "a b" vs "A b": intersection "b", token_set ratio 2/3.
        (DistanceMeasure.TOKEN_SET_RATIO, "a b", "A b", 2 / 3),
    ],
)
async def test_string_similarity_by_hand(
    measure: DistanceMeasure, reference: str, response: str, expected: float
) -> None:
    metric = NonLLMStringSimilarity(distance_measure=measure)
    value = await metric.single_turn_ascore(
        SingleTurnSample(response=response, reference=reference)
    )
    assert value == pytest.approx(expected, abs=1e-12)


async def test_jaro_winkler_boosts_common_prefix() -> None:
    jaro = NonLLMStringSimilarity(distance_measure=DistanceMeasure.JARO).compare("MARTHA", "MARHTA")
    winkler = NonLLMStringSimilarity(distance_measure=DistanceMeasure.JARO_WINKLER).compare(
        "MARTHA", "MARHTA"
    )
    # Prefix "MAR" (l=3), p=0.1: jw = j + 3*0.1*(1-j).
    assert winkler == pytest.approx(jaro + 0.3 * (1 - jaro), abs=1e-12)


async def test_missing_fields_are_named() -> None:
    with pytest.raises(
        InvalidSampleError, match="metric 'exact_match' needs the sample field 'reference'"
    ):
        await ExactMatch().single_turn_ascore(SingleTurnSample(response="x"))
    with pytest.raises(InvalidSampleError, match="'response'"):
        await NonLLMStringSimilarity().single_turn_ascore(SingleTurnSample(reference="x"))


def test_distance_measure_accepts_its_string_value() -> None:
    assert NonLLMStringSimilarity(distance_measure="jaro").distance_measure is DistanceMeasure.JARO
