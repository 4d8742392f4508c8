"""Token usage of judge calls (re-export: :class:`Usage` lives in :mod:`turneval.usage`)."""

from __future__ import annotations

from turneval.usage import Usage

__all__ = ["Usage"]
