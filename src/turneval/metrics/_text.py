"""Text metrics of ``response`` against ``reference``; each is also an argument comparator."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from functools import cache, cached_property
from typing import Any, ClassVar, Literal

from pydantic import model_validator

from turneval.errors import ConfigError
from turneval.metrics.base import Explained, SingleTurnMetric, require
from turneval.samples import SingleTurnSample

__all__ = [
    "BleuScore",
    "DistanceMeasure",
    "ExactMatch",
    "NonLLMStringSimilarity",
    "RougeScore",
    "StringMetric",
    "similarity_functions",
]


class StringMetric(SingleTurnMetric, ABC):
    """A single-turn metric that compares two strings with a pure function.

    :meth:`compare` is what tool-call metrics call for each argument, so a string metric used
    as ``arg_comparison_metric`` costs one function call per argument, not one sample.
    """

    @abstractmethod
    def compare(self, reference: str, prediction: str) -> float:
        """Score ``prediction`` against ``reference``, in [0, 1]."""

    def _identical_scores_one(self) -> bool:
        """Whether ``compare(s, s)`` is exactly 1.0 for every string ``s``.

        Tool-call metrics then score arguments with equal ``str()`` as 1.0 without building
        the strings. False unless a subclass knows better.
        """
        return False

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


@cache
def similarity_functions() -> dict[DistanceMeasure, Callable[[str, str], float]]:
    """Each :class:`DistanceMeasure`'s similarity in [0, 1] (rapidfuzz is imported on first use)."""
    from rapidfuzz import distance, fuzz

    return {
        DistanceMeasure.LEVENSHTEIN: _from_distance(distance.Levenshtein),
        DistanceMeasure.HAMMING: _from_distance(distance.Hamming),
        DistanceMeasure.JARO: _from_distance(distance.Jaro),
        DistanceMeasure.JARO_WINKLER: _from_distance(distance.JaroWinkler),
        DistanceMeasure.INDEL: _from_distance(distance.Indel),
        DistanceMeasure.TOKEN_SET_RATIO: _from_ratio(fuzz.token_set_ratio),
        DistanceMeasure.TOKEN_SORT_RATIO: _from_ratio(fuzz.token_sort_ratio),
        DistanceMeasure.PARTIAL_RATIO: _from_ratio(fuzz.partial_ratio),
    }


_IDENTICAL_ONE = frozenset(
    {
        DistanceMeasure.LEVENSHTEIN,
        DistanceMeasure.HAMMING,
        DistanceMeasure.JARO,
        DistanceMeasure.JARO_WINKLER,
        DistanceMeasure.INDEL,
    }
)
"""Measures of ``1 - normalized_distance``: identical strings are at distance 0, score 1.0."""


class NonLLMStringSimilarity(StringMetric):
    """String similarity in [0, 1] computed with rapidfuzz.

    Distances give ``1 - normalized_distance(reference, response)`` (as ragas does); the
    ratios give ``fuzz.<ratio>(reference, response) / 100`` with no processor (case-sensitive).
    Hamming on strings of different lengths counts the length difference as substitutions.
    """

    name: str = "non_llm_string_similarity"
    distance_measure: DistanceMeasure = DistanceMeasure.LEVENSHTEIN

    @cached_property
    def _similarity(self) -> Callable[[str, str], float]:
        # Cleared by Metric.__setattr__ when distance_measure is reassigned.
        return similarity_functions()[self.distance_measure]

    def compare(self, reference: str, prediction: str) -> float:
        """Similarity of the two strings under ``distance_measure``."""
        return self._similarity(reference, prediction)

    def _identical_scores_one(self) -> bool:
        return self.distance_measure in _IDENTICAL_ONE


def _extra(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:  # pragma: no cover - the extra is installed in development
        raise ConfigError(
            f"this metric needs {module.split('.')[0]}: pip install 'turneval[text]'"
        ) from exc


class BleuScore(StringMetric):
    """Sentence BLEU in [0, 1]: sacrebleu's ``sentence_bleu(response, [reference]).score / 100``.

    sacrebleu's defaults: 13a tokenisation, case-sensitive, exponential smoothing, effective
    order. One scorer object is built per metric and reused.
    """

    name: str = "bleu"
    ragas_names: ClassVar[tuple[str, ...]] = ("bleu_score",)

    @cached_property
    def _bleu(self) -> Any:
        metrics = _extra("sacrebleu.metrics")
        return metrics.BLEU(effective_order=True)

    def compare(self, reference: str, prediction: str) -> float:
        """BLEU of ``prediction`` against the single ``reference``.

        Clipped to 1.0: sacrebleu returns 100.00000000000004 for some perfect matches.
        """
        return min(float(self._bleu.sentence_score(prediction, [reference]).score) / 100, 1.0)


RougeType = Literal[
    "rouge1",
    "rouge2",
    "rouge3",
    "rouge4",
    "rouge5",
    "rouge6",
    "rouge7",
    "rouge8",
    "rouge9",
    "rougeL",
    "rougeLsum",
]


class RougeScore(StringMetric):
    """ROUGE, computed by Google's ``rouge-score`` package with the same options.

    Attributes:
        mode: Which ROUGE value is the score: ``fmeasure`` (default), ``precision`` or
            ``recall`` (ragas' keyword and values).
        rouge_type: ``rouge1`` ... ``rouge9`` (n-grams), ``rougeL`` (longest common
            subsequence) or ``rougeLsum`` (summary-level LCS over newline-separated sentences).
        use_stemmer: Porter-stem tokens before matching.
        split_summaries: For ``rougeLsum``, split sentences with NLTK when they are not
            newline-separated. This needs NLTK's ``punkt_tab`` data, which NLTK downloads from
            its own site (``python -m nltk.downloader punkt_tab``); without it, construction
            raises :class:`ConfigError`.
    """

    name: str = "rouge"
    ragas_names: ClassVar[tuple[str, ...]] = ("rouge_score",)
    rouge_type: RougeType = "rougeL"
    mode: Literal["fmeasure", "precision", "recall"] = "fmeasure"
    use_stemmer: bool = False
    split_summaries: bool = False

    @model_validator(mode="after")
    def _check_sentence_data(self) -> RougeScore:
        if self.rouge_type == "rougeLsum" and self.split_summaries:
            nltk = _extra("nltk")
            try:
                nltk.data.find("tokenizers/punkt_tab/english/")
            except LookupError:
                raise ConfigError(
                    "RougeScore(rouge_type='rougeLsum', split_summaries=True) splits sentences "
                    "with NLTK's punkt_tab data, which is not installed: run "
                    "'python -m nltk.downloader punkt_tab' (or set NLTK_DATA), or separate "
                    "sentences with newlines and keep split_summaries=False"
                ) from None
        return self

    @cached_property
    def _scorer(self) -> Any:
        # Cleared by Metric.__setattr__ when an option changes.
        rouge_scorer = _extra("rouge_score.rouge_scorer")
        return rouge_scorer.RougeScorer(
            [self.rouge_type], use_stemmer=self.use_stemmer, split_summaries=self.split_summaries
        )

    def compare(self, reference: str, prediction: str) -> float:
        """ROUGE (``mode``: F-measure, precision or recall) of ``prediction`` against ``reference``."""
        return float(getattr(self._scorer.score(reference, prediction)[self.rouge_type], self.mode))
