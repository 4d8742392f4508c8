"""The providers' batch APIs through their official SDKs: OpenAI (and Azure) and Anthropic.

A provider builds the body of one judge request exactly as the judge's model would send it
live (its own payload builder: sampling parameters, the strict JSON schema or the forced tool),
creates batches with metadata naming the run, lists them (to reconcile after a crash), polls
them, downloads their results and turns one result back into the model's own message.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

__all__ = ["Outcome", "Provider", "RemoteBatch", "provider_for"]


@dataclass(frozen=True)
class RemoteBatch:
    """A batch as the provider reports it."""

    id: str
    status: str
    ended: bool
    metadata: dict[str, str]
    created_at: float = 0.0
    total: int = 0
    done: int = 0
    error: str | None = None  # why the provider refused the whole batch


@dataclass(frozen=True)
class Outcome:
    """One request's result: the model's message, or the provider's error."""

    custom_id: str
    message: Any = None  # an AIMessage
    error: str | None = None


class Provider(ABC):
    """A provider's batch API (see the module's docstring)."""

    name: str
    max_requests: int
    max_bytes: int
    discount_known: float = 0.5

    def __init__(self, llm: Any) -> None:
        """Talk through ``llm``'s own client (its base URL, key and headers)."""
        self.llm = llm

    @property
    def server(self) -> str:
        """The provider and the server its client talks to (one per batch run)."""
        return f"{self.name} at {getattr(self.client, 'base_url', '?')}"

    client: Any

    @abstractmethod
    def body(self, messages: list[BaseMessage], schema: type[BaseModel]) -> dict[str, Any]:
        """The request's body, as the model would send it live."""

    @abstractmethod
    def create(self, requests: list[tuple[str, dict[str, Any]]], metadata: dict[str, str]) -> str:
        """Create a batch of ``(custom_id, body)`` requests; its provider id."""

    @abstractmethod
    def retrieve(self, batch_id: str) -> RemoteBatch:
        """The batch's current state."""

    @abstractmethod
    def batches(self, since: float) -> list[RemoteBatch]:
        """The account's batches created at ``since`` (a POSIX time) or later."""

    @abstractmethod
    def results(self, batch_id: str) -> list[Outcome]:
        """Every result of an ended batch."""

    @abstractmethod
    def cancel(self, batch_id: str) -> None:
        """Ask the provider to cancel the batch."""


class OpenAIProvider(Provider):
    """OpenAI's (or Azure OpenAI's) Batch API: a JSONL file, ``/v1/batches``, result files."""

    name = "openai"
    max_requests = 50_000
    max_bytes = 200 * 2**20

    def __init__(self, llm: Any) -> None:
        """Use ``llm.root_client`` (the model's synchronous OpenAI client)."""
        super().__init__(llm)
        self.client = llm.root_client
        self._formats: dict[type[BaseModel], dict[str, Any]] = {}

    def body(self, messages: list[BaseMessage], schema: type[BaseModel]) -> dict[str, Any]:
        """The chat-completions body with the verdict's strict JSON-schema response format."""
        from openai.lib._parsing._completions import type_to_response_format_param

        response_format = self._formats.get(schema)
        if response_format is None:
            response_format = dict(type_to_response_format_param(schema))  # type: ignore[arg-type]
            self._formats[schema] = response_format
        payload = dict(self.llm._get_request_payload(messages, response_format=response_format))
        if "messages" not in payload:  # the model is set to use the Responses API
            raise ConfigError(
                "the batch engine sends Chat Completions requests: build the judge with "
                "ChatOpenAI(..., use_responses_api=False)"
            )
        payload.pop("stream", None)
        extra = payload.pop("extra_body", None) or {}
        return {**payload, **extra}

    @property
    def _endpoint(self) -> str:
        # Azure OpenAI's batch lines and batches name the endpoint without the version.
        return (
            "/chat/completions"
            if type(self.llm).__name__ == "AzureChatOpenAI"
            else ("/v1/chat/completions")
        )

    def create(self, requests: list[tuple[str, dict[str, Any]]], metadata: dict[str, str]) -> str:
        """Upload the JSONL file of requests and create the batch on it."""
        url = self._endpoint
        lines = "".join(
            json.dumps(
                {"custom_id": cid, "method": "POST", "url": url, "body": body},
                ensure_ascii=False,
            )
            + "\n"
            for cid, body in requests
        )
        upload = self.client.files.create(
            file=("turneval-batch.jsonl", lines.encode()), purpose="batch"
        )
        batch = self.client.batches.create(
            input_file_id=upload.id,
            endpoint=url,
            completion_window="24h",
            metadata=metadata,
        )
        return str(batch.id)

    @staticmethod
    def _remote(batch: Any) -> RemoteBatch:
        counts = batch.request_counts
        errors = getattr(batch, "errors", None)
        data = getattr(errors, "data", None) or []
        return RemoteBatch(
            id=batch.id,
            error="; ".join(str(e.message) for e in data) or None,
            status=batch.status,
            ended=batch.status in ("completed", "failed", "expired", "cancelled"),
            metadata=dict(batch.metadata or {}),
            created_at=float(batch.created_at or 0),
            total=counts.total if counts else 0,
            done=(counts.completed + counts.failed) if counts else 0,
        )

    def retrieve(self, batch_id: str) -> RemoteBatch:
        """``GET /batches/{id}``."""
        return self._remote(self.client.batches.retrieve(batch_id))

    def batches(self, since: float) -> list[RemoteBatch]:
        """``GET /batches``, page after page (newest first) until one older than ``since``."""
        return _newer(map(self._remote, self.client.batches.list(limit=100)), since)

    def results(self, batch_id: str) -> list[Outcome]:
        """Read the output file (answers) and the error file (errors, expired requests)."""
        batch = self.client.batches.retrieve(batch_id)
        outcomes = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            text = self.client.files.content(file_id).text
            for line in text.splitlines():
                if line.strip():
                    outcomes.append(self._outcome(json.loads(line)))
        return outcomes  # a refused ("failed") batch has none: its requests have no result

    def _outcome(self, row: dict[str, Any]) -> Outcome:
        custom_id = str(row.get("custom_id"))
        response = row.get("response") or {}
        error = row.get("error")
        if response.get("status_code") == 200:
            generation = self.llm._create_chat_result(response["body"]).generations[0]
            return Outcome(custom_id, message=generation.message)
        if error:
            return Outcome(custom_id, error=f"{error.get('code')}: {error.get('message')}")
        body = response.get("body") or {}
        detail = (body.get("error") or {}).get("message", json.dumps(body))
        return Outcome(custom_id, error=f"HTTP {response.get('status_code')}: {detail}")

    def cancel(self, batch_id: str) -> None:
        """``POST /batches/{id}/cancel``."""
        self.client.batches.cancel(batch_id)


class AnthropicProvider(Provider):
    """Anthropic's Message Batches; the verdict comes through a forced tool call.

    Message batches carry no metadata: a restart matches a batch by its creation time (after
    the folder's write-ahead record) and its request count.
    """

    name = "anthropic"
    max_requests = 100_000
    max_bytes = 256 * 2**20

    def __init__(self, llm: Any) -> None:
        """Use ``llm._client`` (the model's synchronous Anthropic client)."""
        super().__init__(llm)
        self.client = llm._client

    def body(self, messages: list[BaseMessage], schema: type[BaseModel]) -> dict[str, Any]:
        """The messages body with the verdict as the one tool the model must call."""
        from langchain_anthropic.chat_models import convert_to_anthropic_tool

        tool = convert_to_anthropic_tool(schema)
        payload = dict(
            self.llm._get_request_payload(
                messages, tools=[tool], tool_choice={"type": "tool", "name": tool["name"]}
            )
        )
        payload.pop("stream", None)
        return payload

    def create(self, requests: list[tuple[str, dict[str, Any]]], metadata: dict[str, str]) -> str:
        """``POST /v1/messages/batches`` (``metadata`` cannot be sent: see the class)."""
        batch = self.client.messages.batches.create(
            requests=[{"custom_id": cid, "params": body} for cid, body in requests]
        )
        return str(batch.id)

    @staticmethod
    def _remote(batch: Any) -> RemoteBatch:
        counts = batch.request_counts
        done = counts.succeeded + counts.errored + counts.canceled + counts.expired
        return RemoteBatch(
            id=batch.id,
            status=batch.processing_status,
            ended=batch.processing_status == "ended",
            metadata={},
            created_at=batch.created_at.timestamp(),
            total=done + counts.processing,
            done=done,
        )

    def retrieve(self, batch_id: str) -> RemoteBatch:
        """``GET /v1/messages/batches/{id}``."""
        return self._remote(self.client.messages.batches.retrieve(batch_id))

    def batches(self, since: float) -> list[RemoteBatch]:
        """``GET /v1/messages/batches``, page after page until one older than ``since``."""
        return _newer(map(self._remote, self.client.messages.batches.list(limit=100)), since)

    def results(self, batch_id: str) -> list[Outcome]:
        """The results file, one result per request."""
        outcomes = []
        for row in self.client.messages.batches.results(batch_id):
            result = row.result
            if result.type == "succeeded":
                chat = self.llm._format_output(result.message)
                outcomes.append(Outcome(row.custom_id, message=chat.generations[0].message))
            elif result.type == "errored":
                error = result.error.error
                outcomes.append(Outcome(row.custom_id, error=f"{error.type}: {error.message}"))
            else:
                outcomes.append(Outcome(row.custom_id, error=f"request {result.type}"))
        return outcomes

    def cancel(self, batch_id: str) -> None:
        """``POST /v1/messages/batches/{id}/cancel``."""
        self.client.messages.batches.cancel(batch_id)


def _newer(batches: Iterable[RemoteBatch], since: float) -> list[RemoteBatch]:
    """The batches (newest first, pages fetched as needed) up to the first older than ``since``."""
    found = []
    for batch in batches:
        if batch.created_at < since:
            break
        found.append(batch)
    return found


def provider_for(llm: Any) -> Provider:
    """The batch API of the judge model ``llm`` (``ChatOpenAI``, ``AzureChatOpenAI``, ``ChatAnthropic``)."""
    kind = type(llm).__name__
    if kind in ("ChatOpenAI", "AzureChatOpenAI") and getattr(llm, "root_client", None):
        return OpenAIProvider(llm)
    if kind == "ChatAnthropic":
        return AnthropicProvider(llm)
    raise ConfigError(
        f"the batch engine needs a ChatOpenAI, AzureChatOpenAI or ChatAnthropic judge, got "
        f"{kind}: run this judge synchronously instead"
    )
