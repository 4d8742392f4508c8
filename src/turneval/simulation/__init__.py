"""Simulated users: a model (or a script) holds the conversation with a live agent, k times.

A :class:`Scenario` says what a user wants (``goal``), who they are (``persona``) and what they
know (``user_facts``). A user, :class:`SimulatedUser` (any LangChain chat model playing the
user, one structured call per turn) or :class:`ScriptedUser` (fixed turns), talks with the
agent until it is done, runs out of turns, or the agent fails. :func:`asimulate` does this for
every scenario and trial and returns one :class:`~turneval.MultiTurnSample` per (scenario,
trial), in input order; ``EvalTask(scenarios, metrics).evaluate(runnable=agent, user=...,
trials=k)`` simulates and scores, and its ``summary()`` adds pass^k and pass@k.

A conversation always opens with a human turn: a user that says it is done before its first
message is asked again (up to 3 times), then the trial fails as the user's (no stop reason).

Stop reasons (``metadata["stop_reason"]``): ``user_done`` (the user's goal was reached, or it
gave up), ``max_turns`` (the scenario's user turns ran out), ``agent_error`` (the agent raised,
returned an invalid conversation or exceeded the per-turn step limit), ``timeout`` (the whole
conversation took longer than ``timeout``). When the user model itself fails (after bounded
repair), or ends the conversation before its first message, the conversation has no stop reason
(None): the row fails with the user's error, and the trial counts as neither a success nor a
failure of the agent. A row that failed never reports ``user_done``. The conversation so far is
always kept.

Ready-made worlds with their scenarios are in :mod:`turneval.simulation.domains`.
"""

from turneval.simulation._conversation import DEFAULT_MAX_STEPS
from turneval.simulation._conversation import StopReason as StopReason  # the how-to names it
from turneval.simulation._scenarios import Scenario, as_scenarios
from turneval.simulation._trials import asimulate, evaluate_scenarios, simulate
from turneval.simulation._users import (
    BaseUser,
    OpeningTurn,
    ScriptedUser,
    SimulatedUser,
    UserTurn,
)

__all__ = [
    "BaseUser",
    "DEFAULT_MAX_STEPS",
    "OpeningTurn",
    "Scenario",
    "ScriptedUser",
    "SimulatedUser",
    "UserTurn",
    "as_scenarios",
    "asimulate",
    "evaluate_scenarios",
    "simulate",
]
