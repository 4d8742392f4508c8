"""The OpenAI converter's older import path: it lives in :mod:`turneval.messages.openai`."""

from turneval.messages.openai import from_openai, to_openai

__all__ = ["from_openai", "to_openai"]
