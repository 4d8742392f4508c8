"""ragas-compatible import path ``ragas.metrics._topic_adherence``: a thin re-export of ``turneval.metrics._topic``.

Kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from turneval.metrics._topic import TopicAdherenceScore

__all__ = ["TopicAdherenceScore"]
