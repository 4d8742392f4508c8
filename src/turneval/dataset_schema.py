"""ragas-compatible import path: ``from turneval.dataset_schema import MultiTurnSample``."""

from turneval.dataset import EvaluationDataset
from turneval.samples import MultiTurnSample, SingleTurnSample

__all__ = ["EvaluationDataset", "MultiTurnSample", "SingleTurnSample"]
