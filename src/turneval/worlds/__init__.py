"""Tool worlds: the tools an agent calls during an evaluation, their state and their faults.

A :class:`ToolWorld` serves tools from a Python object (its public methods; its attributes
are the state), from recorded answers, or from a model simulating them; ``as_langchain_tools()``
gives them to any LangChain or LangGraph agent. A :class:`~turneval.simulation.Scenario` with
a ``world`` gives every trial a fresh copy, and the row records the end state, the calls and
every injected :class:`Faults`. ``EndStateMatch`` and ``StateAssertions``
(:mod:`turneval.metrics`) grade the end state. Two small worlds ship ready-made:
:func:`~turneval.worlds.domains.orders_world` and :func:`~turneval.worlds.domains.files_world`.
"""

from turneval.worlds._backends import ToolError, ToolSpec
from turneval.worlds._faults import FaultKind, Faults
from turneval.worlds._world import ToolWorld, bind_worlds, current_world

__all__ = [
    "FaultKind",
    "Faults",
    "ToolError",
    "ToolSpec",
    "ToolWorld",
    "bind_worlds",
    "current_world",
]
