"""A scripted LangChain chat model: answers in order, records prompts, supports structured output."""

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

Script = str | Exception | Callable[[list[BaseMessage]], str]


class ScriptedChatModel(BaseChatModel):
    """Answers with ``responses`` in order (the last one repeats).

    A response is a string, an exception to raise, or a function of the prompt messages. When
    bound to tools (``with_structured_output``), a JSON answer becomes a tool call. Every call
    records its messages; ``max_in_flight`` tracks concurrency.
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
        return self._max_in_flight

    @property
    def calls(self) -> int:
        return len(self.prompts)

    def prompt_chars(self) -> int:
        return sum(len(str(m.content)) for prompt in self.prompts for m in prompt)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        if not self.tool_calling:
            raise NotImplementedError
        names = [getattr(tool, "__name__", None) or tool.get("name") for tool in tools]
        return self.bind(
            tool_names=names,
            **{k: v for k, v in kwargs.items() if k != "ls_structured_output_format"},
        )

    def _answer(self, messages: list[BaseMessage], tool_names: list[str] | None) -> AIMessage:
        index = min(len(self.prompts), len(self.responses) - 1)
        self.prompts.append(list(messages))
        script = self.responses[index]
        if isinstance(script, Exception):
            raise script
        text = script(messages) if callable(script) else script
        usage = {
            "input_tokens": self.usage[0],
            "output_tokens": self.usage[1],
            "total_tokens": sum(self.usage),
        }
        if tool_names:
            try:
                args = json.loads(text)
            except json.JSONDecodeError:
                return AIMessage(content=text, usage_metadata=usage)  # type: ignore[arg-type]
            call = {"name": tool_names[0], "args": args, "id": f"call_{len(self.prompts)}"}
            return AIMessage(content="", tool_calls=[call], usage_metadata=usage)  # type: ignore[arg-type]
        return AIMessage(content=text, usage_metadata=usage)  # type: ignore[arg-type]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(
            generations=[ChatGeneration(message=self._answer(messages, kwargs.get("tool_names")))]
        )

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
