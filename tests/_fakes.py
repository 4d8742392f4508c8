"""The scripted chat model the tests use is the public one users test with."""

from langchain_core.messages import BaseMessage

from turneval.testing import ScriptedChatModel

__all__ = ["ScriptedChatModel", "text_of"]


def text_of(message: BaseMessage) -> str:
    """A LangChain message's content, which turneval's judges always send as one string."""
    assert isinstance(message.content, str), f"expected text content, got {message.content!r}"
    return message.content
