"""Attribute names read from traces: the GenAI semantic conventions and OpenInference.

GenAI names are pinned to **OpenTelemetry semantic conventions v1.38.0** (the GenAI conventions,
since moved to their own repository, ``open-telemetry/semantic-conventions-genai``; the
``GEN_AI_*`` constants of ``opentelemetry-semantic-conventions`` are deprecated, so they are
spelled here once). Names the conventions renamed are read as aliases, newest first.
OpenInference names come from ``openinference-semantic-conventions``' constants.
"""

from __future__ import annotations

from typing import Final

from openinference.semconv.trace import (
    MessageAttributes,
    MessageContentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
    ToolCallAttributes,
)

GENAI_SEMCONV_VERSION: Final = "1.38.0"
"""The version of the GenAI semantic conventions the names below are pinned to."""

# -- GenAI semantic conventions v1.38.0 --------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
OP_CHAT: Final = frozenset({"chat", "text_completion", "generate_content"})
OP_TOOL: Final = "execute_tool"
OP_AGENT: Final = frozenset({"invoke_agent", "create_agent"})
PROVIDER_NAME: Final = ("gen_ai.provider.name", "gen_ai.system")  # renamed in v1.37.0
CONVERSATION_ID: Final = "gen_ai.conversation.id"
AGENT_NAME: Final = "gen_ai.agent.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
INPUT_TOKENS: Final = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")  # v1.27.0
OUTPUT_TOKENS: Final = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
# Before v1.37.0 (and still written by OpenLLMetry's older releases): indexed attributes.
PROMPT_PREFIX: Final = "gen_ai.prompt."
COMPLETION_PREFIX: Final = "gen_ai.completion."
# Message events (v1.28.0 to v1.36.0): the event name gives the role.
MESSAGE_EVENTS: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": "assistant",
}
# Written back: the evaluation event (v1.38.0).
EVALUATION_EVENT: Final = "gen_ai.evaluation.result"
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
ERROR_TYPE: Final = "error.type"
# OpenLLMetry (traceloop) classification attributes, for spans without gen_ai.operation.name.
TRACELOOP_REQUEST_TYPE: Final = "llm.request.type"
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"

# -- OpenInference -----------------------------------------------------------------------------
OI_SPAN_KIND: Final = SpanAttributes.OPENINFERENCE_SPAN_KIND
OI_LLM: Final = OpenInferenceSpanKindValues.LLM.value
OI_TOOL: Final = OpenInferenceSpanKindValues.TOOL.value
OI_AGENT: Final = OpenInferenceSpanKindValues.AGENT.value
OI_INPUT_MESSAGES: Final = SpanAttributes.LLM_INPUT_MESSAGES + "."
OI_OUTPUT_MESSAGES: Final = SpanAttributes.LLM_OUTPUT_MESSAGES + "."
OI_ROLE: Final = MessageAttributes.MESSAGE_ROLE
OI_CONTENT: Final = MessageAttributes.MESSAGE_CONTENT
OI_CONTENTS: Final = MessageAttributes.MESSAGE_CONTENTS + "."
OI_CONTENT_TEXT: Final = MessageContentAttributes.MESSAGE_CONTENT_TEXT
OI_TOOL_CALLS: Final = MessageAttributes.MESSAGE_TOOL_CALLS + "."
OI_TOOL_CALL_ID: Final = MessageAttributes.MESSAGE_TOOL_CALL_ID
OI_NAME: Final = MessageAttributes.MESSAGE_NAME
OI_CALL_ID: Final = ToolCallAttributes.TOOL_CALL_ID
OI_CALL_NAME: Final = ToolCallAttributes.TOOL_CALL_FUNCTION_NAME
OI_CALL_ARGUMENTS: Final = ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON
OI_SESSION_ID: Final = SpanAttributes.SESSION_ID
OI_AGENT_NAME: Final = SpanAttributes.AGENT_NAME
OI_MODEL_NAME: Final = SpanAttributes.LLM_MODEL_NAME
OI_PROMPT_TOKENS: Final = SpanAttributes.LLM_TOKEN_COUNT_PROMPT
OI_COMPLETION_TOKENS: Final = SpanAttributes.LLM_TOKEN_COUNT_COMPLETION
OI_TOOL_NAME: Final = SpanAttributes.TOOL_NAME
OI_INPUT_VALUE: Final = SpanAttributes.INPUT_VALUE
OI_OUTPUT_VALUE: Final = SpanAttributes.OUTPUT_VALUE
OI_REDACTED: Final = "__REDACTED__"  # openinference-instrumentation's REDACTED_VALUE

SESSION_KEYS: Final = (CONVERSATION_ID, OI_SESSION_ID)
"""The attributes naming the session (conversation) a span belongs to: GenAI, then OpenInference."""
AGENT_KEYS: Final = (AGENT_NAME, OI_AGENT_NAME)
MODEL_KEYS: Final = (RESPONSE_MODEL, REQUEST_MODEL, OI_MODEL_NAME)
