"""ragas-compatible import path ``ragas.integrations.langgraph``.

``convert_to_ragas_messages`` is a thin wrapper over :func:`turneval.messages.from_langchain`,
kept so that code written for ragas ports by renaming ``ragas`` to ``turneval``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turneval.messages import Message, from_langchain

__all__ = ["convert_to_ragas_messages"]


def convert_to_ragas_messages(messages: Sequence[Any], metadata: bool = False) -> list[Message]:
    """Convert LangChain messages (e.g. a LangGraph state's ``messages``) to turneval messages.

    Args:
        messages: LangChain system, human, AI and tool messages.
        metadata: Keep each message's ids, usage and response metadata (ragas' keyword);
            by default they are left out, as in ragas.

    Returns:
        The conversation, ready for ``MultiTurnSample(user_input=...)``.

    Raises:
        InvalidSampleError: naming the message index and field, as ``from_langchain`` does.
    """
    converted = from_langchain(list(messages))
    if metadata:
        return converted
    return [message.model_copy(update={"metadata": None}) for message in converted]
