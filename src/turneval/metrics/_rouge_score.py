"""ragas-compatible import path ``ragas.metrics._rouge_score``: a thin re-export of ``turneval.metrics._text``.

Kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from turneval.metrics._text import RougeScore

__all__ = ["RougeScore"]
