"""The scripted chat model the tests use is the public one users test with."""

from turneval.testing import ScriptedChatModel

__all__ = ["ScriptedChatModel"]
