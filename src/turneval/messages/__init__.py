"""Conversation messages: what a human, an AI, a tool and the system said, and their converters.

A conversation is a list of :data:`Message` values, a union discriminated on ``type``, so a
message list round-trips through JSON losslessly::

    {"type": "ai", "content": "...", "tool_calls": [{"name": "...", "args": {...}}]}

The package holds the message model (:mod:`turneval.messages._model`), the one rule for tool
results (:mod:`turneval.messages._tool_results`) and the converters from and to LangChain
(:mod:`turneval.messages._langchain`) and OpenAI chat messages
(:mod:`turneval.messages._openai`); :mod:`turneval.formats` re-exports the converters.
:mod:`turneval.messages._agents` says which agent produced each message and finds the
handoffs between agents.
"""

from turneval.messages._agents import (
    Handoff,
    HandoffAt,
    agent_key,
    find_handoffs,
    handoff_target,
    message_agents,
)
from turneval.messages._langchain import from_langchain, to_langchain
from turneval.messages._model import (
    AIMessage,
    HumanMessage,
    Message,
    MessageBase,
    MessageList,
    SystemMessage,
    ToolCall,
    ToolMessage,
    messages_from_json,
    messages_to_json,
)
from turneval.messages._openai import from_openai, to_openai
from turneval.messages._tool_results import OpenToolCalls

__all__ = [
    "AIMessage",
    "Handoff",
    "HandoffAt",
    "HumanMessage",
    "Message",
    "MessageBase",
    "MessageList",
    "OpenToolCalls",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "agent_key",
    "find_handoffs",
    "from_langchain",
    "from_openai",
    "handoff_target",
    "message_agents",
    "messages_from_json",
    "messages_to_json",
    "to_langchain",
    "to_openai",
]
