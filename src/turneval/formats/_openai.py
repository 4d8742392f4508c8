"""The OpenAI converter's older import path: it lives in :mod:`turneval.messages._openai`."""

from turneval.messages._openai import from_openai, to_openai

__all__ = ["from_openai", "to_openai"]
