"""ragas-compatible import path ``ragas.metrics._goal_accuracy``: a thin re-export of ``turneval.metrics._goal``.

Kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from turneval.metrics._goal import AgentGoalAccuracyWithoutReference, AgentGoalAccuracyWithReference

__all__ = ["AgentGoalAccuracyWithReference", "AgentGoalAccuracyWithoutReference"]
