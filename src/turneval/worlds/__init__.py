"""Tool worlds: the tools an agent calls during an evaluation, their state and their faults.

A :class:`ToolWorld` serves tools from a Python object (its public methods; its attributes
are the state) or several (``from_objects``, one state each), from recorded answers, or from a
model simulating them; ``as_langchain_tools()`` gives them to any LangChain or LangGraph agent.
States are compared as the backend defines equality (:func:`compare_states`: an object's own
``__eq__``, else structurally), each :class:`Difference` at its path. A
:class:`~turneval.simulation.Scenario` with a ``world`` gives every trial a fresh copy, and the
row records the end state, the calls and every injected :class:`Faults`. ``EndStateMatch`` and
``StateAssertions`` (:mod:`turneval.metrics`) grade the end state. Two small worlds ship
ready-made, with their scenarios: :func:`~turneval.simulation.domains.orders_world` and
:func:`~turneval.simulation.domains.files_world` (the package knows nothing of the simulation:
the scenarios that play on worlds are the simulation's).
"""

from turneval.worlds._backends import TOOL_THREADS, ToolError, ToolSpec
from turneval.worlds._faults import FaultKind, Faults
from turneval.worlds._state import (
    MAX_DEPTH,
    Difference,
    WorldStateError,
    compare_states,
    path_matches,
    path_segments,
)
from turneval.worlds._world import ToolWorld, bind_worlds, current_world

__all__ = [
    "Difference",
    "FaultKind",
    "Faults",
    "MAX_DEPTH",
    "TOOL_THREADS",
    "ToolError",
    "ToolSpec",
    "ToolWorld",
    "WorldStateError",
    "bind_worlds",
    "compare_states",
    "current_world",
    "path_matches",
    "path_segments",
]
