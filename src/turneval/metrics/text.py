"""Text metrics of ``response`` against ``reference``; each is also an argument comparator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import Any

from rapidfuzz import distance, fuzz

from turneval.metrics.base import Explained, SingleTurnMetric, require
from turneval.samples import SingleTurnSample

__all__ = ["DistanceMeasure", "ExactMatch", "NonLLMStringSimilarity", "StringMetric"]


class StringMetric(SingleTurnMetric, ABC):
    """A single-turn metric that compares two strings with a pure function.

    :meth:`compare` is what tool-call metrics call for each argument, so a string metric used
    as ``arg_comparison_metric`` costs one function call per argument, not one sample.
    """

    @abstractmethod
    def compare(self, reference: str, prediction: str) -> float:
        """Score ``prediction`` against ``reference``, in [0, 1]."""

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        reference = require(self, sample, "reference")
        response = require(self, sample, "response")
        value = self.compare(reference, response)
        return Explained(value, f"{self.name}={value:.3f}")


class ExactMatch(StringMetric):
    """1.0 if ``response == reference`` (case- and whitespace-sensitive), else 0.0."""

    name: str = "exact_match"

    def compare(self, reference: str, prediction: str) -> float:
        """1.0 when the strings are identical."""
        return 1.0 if reference == prediction else 0.0

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        reference = require(self, sample, "reference")
        response = require(self, sample, "response")
        value = self.compare(reference, response)
        reason = "response equals reference" if value else "response differs from reference"
        return Explained(value, reason)


class DistanceMeasure(Enum):
    """String measures of :class:`NonLLMStringSimilarity`, all computed with rapidfuzz."""

    LEVENSHTEIN = "levenshtein"
    HAMMING = "hamming"
    JARO = "jaro"
    JARO_WINKLER = "jaro_winkler"
    INDEL = "indel"
    TOKEN_SET_RATIO = "token_set_ratio"
    TOKEN_SORT_RATIO = "token_sort_ratio"
    PARTIAL_RATIO = "partial_ratio"


def _from_distance(scorer: Any) -> Callable[[str, str], float]:
    normalized_distance = scorer.normalized_distance

    def similarity(reference: str, prediction: str) -> float:
        return 1 - float(normalized_distance(reference, prediction))

    return similarity


def _from_ratio(ratio: Callable[..., float]) -> Callable[[str, str], float]:
    def similarity(reference: str, prediction: str) -> float:
        return float(ratio(reference, prediction, processor=None)) / 100

    return similarity


_MEASURES: dict[DistanceMeasure, Callable[[str, str], float]] = {
    DistanceMeasure.LEVENSHTEIN: _from_distance(distance.Levenshtein),
    DistanceMeasure.HAMMING: _from_distance(distance.Hamming),
    DistanceMeasure.JARO: _from_distance(distance.Jaro),
    DistanceMeasure.JARO_WINKLER: _from_distance(distance.JaroWinkler),
    DistanceMeasure.INDEL: _from_distance(distance.Indel),
    DistanceMeasure.TOKEN_SET_RATIO: _from_ratio(fuzz.token_set_ratio),
    DistanceMeasure.TOKEN_SORT_RATIO: _from_ratio(fuzz.token_sort_ratio),
    DistanceMeasure.PARTIAL_RATIO: _from_ratio(fuzz.partial_ratio),
}


class NonLLMStringSimilarity(StringMetric):
    """String similarity in [0, 1] computed with rapidfuzz.

    Distances give ``1 - normalized_distance(reference, response)`` (as ragas does); the
    ratios give ``fuzz.<ratio>(reference, response) / 100`` with no processor (case-sensitive).
    Hamming on strings of different lengths counts the length difference as substitutions.
    """

    name: str = "non_llm_string_similarity"
    distance_measure: DistanceMeasure = DistanceMeasure.LEVENSHTEIN

    def compare(self, reference: str, prediction: str) -> float:
        """Similarity of the two strings under ``distance_measure``."""
        return _MEASURES[self.distance_measure](reference, prediction)
