"""Message-format conversions: LangChain and OpenAI chat messages to and from turneval's.

Every converter applies one rule for tool results (:class:`OpenToolCalls`), the same rule
:class:`~turneval.samples.MultiTurnSample` validates with, so a conversation is accepted or
rejected alike whichever way it comes in. The converters live in :mod:`turneval.messages`
(beside the message model they build); this module is their other import path.
"""

from turneval.messages import OpenToolCalls, from_langchain, from_openai, to_langchain, to_openai

__all__ = ["OpenToolCalls", "from_langchain", "from_openai", "to_langchain", "to_openai"]
