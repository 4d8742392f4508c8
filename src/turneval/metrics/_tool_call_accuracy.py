"""ragas-compatible import path ``ragas.metrics._tool_call_accuracy``: a thin re-export of ``turneval.metrics._tool_calls``.

Kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from turneval.metrics._tool_calls import ToolCallAccuracy

__all__ = ["ToolCallAccuracy"]
