"""ScriptedChatModel: a scripted LangChain chat model (re-exported by ``turneval.testing``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

__all__ = ["ScriptedChatModel"]

Response = str | AIMessage | Exception | Callable[[list[BaseMessage]], "str | AIMessage"]


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script, for tests of judges and agents.

    ``responses`` are used in order, the last one repeating. Each is a string, an
    ``AIMessage`` (e.g. with ``tool_calls``, for agents), an exception to raise, or a function of
    the prompt messages returning either (a policy). Bound to tools by
    ``with_structured_output``, a JSON string becomes a tool call, so structured output works.
    Every call records its messages in ``prompts``; ``max_in_flight`` tracks concurrency and
    ``delay`` simulates latency. String answers carry ``usage`` as usage metadata.
    """

    responses: list[Any]
    usage: tuple[int, int] = (100, 20)
    delay: float = 0.0
    tool_calling: bool = True
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    _in_flight: int = PrivateAttr(default=0)
    _max_in_flight: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted-fake"

    @property
    def max_in_flight(self) -> int:
        """The most calls that were running at once."""
        return self._max_in_flight

    @property
    def calls(self) -> int:
        """Calls made so far."""
        return len(self.prompts)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Bind tools; their names become available to structured answers."""
        if not self.tool_calling:
            raise NotImplementedError
        names = [
            getattr(tool, "__name__", None) or getattr(tool, "name", None) or tool.get("name")
            for tool in tools
        ]
        extra = {
            k: v
            for k, v in kwargs.items()
            if k not in {"ls_structured_output_format", "tool_choice"}
        }
        return self.bind(tool_names=names, **extra)

    def _answer(self, messages: list[BaseMessage], tool_names: list[str] | None) -> AIMessage:
        index = min(len(self.prompts), len(self.responses) - 1)
        self.prompts.append(list(messages))
        script = self.responses[index]
        if isinstance(script, Exception):
            raise script
        answer = script(messages) if callable(script) else script
        if isinstance(answer, AIMessage):
            return answer
        usage = {
            "input_tokens": self.usage[0],
            "output_tokens": self.usage[1],
            "total_tokens": sum(self.usage),
        }
        if tool_names:
            try:
                args = json.loads(answer)
            except json.JSONDecodeError:
                return AIMessage(content=answer, usage_metadata=usage)
            if isinstance(args, dict):
                call = {"name": tool_names[0], "args": args, "id": f"call_{len(self.prompts)}"}
                return AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        return AIMessage(content=answer, usage_metadata=usage)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._answer(messages, kwargs.get("tool_names"))
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._in_flight += 1
        self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            if self.delay:
                await anyio.sleep(self.delay)
            message = self._answer(messages, kwargs.get("tool_names"))
        finally:
            self._in_flight -= 1
        return ChatResult(generations=[ChatGeneration(message=message)])
