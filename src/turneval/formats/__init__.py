"""Message-format conversions: LangChain and OpenAI chat messages to and from turneval's.

Every converter applies one rule for tool results (:class:`OpenToolCalls`), the same rule
:class:`~turneval.samples.MultiTurnSample` validates with, so a conversation is accepted or
rejected alike whichever way it comes in. The converters are also importable from
:mod:`turneval.messages` (their original home).
"""

from turneval.formats._rule import OpenToolCalls
from turneval.formats.langchain import from_langchain, to_langchain
from turneval.formats.openai import from_openai

__all__ = ["OpenToolCalls", "from_langchain", "from_openai", "to_langchain"]
