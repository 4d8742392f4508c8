"""The LangChain converters' older import path: they live in :mod:`turneval.messages._langchain`."""

from turneval.messages._langchain import from_langchain, to_langchain

__all__ = ["from_langchain", "to_langchain"]
