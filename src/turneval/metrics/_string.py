"""ragas-compatible import path ``ragas.metrics._string``: a thin re-export of ``turneval.metrics._text``.

Kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from turneval.metrics._text import DistanceMeasure, ExactMatch, NonLLMStringSimilarity

__all__ = ["DistanceMeasure", "ExactMatch", "NonLLMStringSimilarity"]
