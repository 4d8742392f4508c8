"""The LangChain converters' older import path: they live in :mod:`turneval.messages.langchain`."""

from turneval.messages.langchain import from_langchain, to_langchain

__all__ = ["from_langchain", "to_langchain"]
