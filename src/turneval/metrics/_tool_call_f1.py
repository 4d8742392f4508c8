"""ragas-compatible import path ``ragas.metrics._tool_call_f1``: a thin re-export of ``turneval.metrics._tool_calls``.

Kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from turneval.metrics._tool_calls import ToolCallF1

__all__ = ["ToolCallF1"]
