"""Evaluate from traces: OpenTelemetry GenAI and OpenInference spans become conversations.

Needs the ``otel`` extra (``pip install 'turneval[otel]'``). See ``docs/how-to/traces.md`` for
every attribute read.
"""

from __future__ import annotations

try:
    import openinference.semconv.trace  # noqa: F401
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "turneval.traces needs the 'otel' extra: pip install 'turneval[otel]' "
        f"(missing: {exc.name})"
    ) from exc

from turneval.traces._api import (
    from_otel_spans,
    from_otlp_json,
    iter_otlp_json,
    to_otel_events,
    trace_conversation,
    write_otlp_json,
)
from turneval.traces._genai import GENAI_SEMCONV_VERSION, SESSION_KEYS
from turneval.traces._spans import Span, from_otlp_span, otlp_attributes

__all__ = [
    "GENAI_SEMCONV_VERSION",
    "SESSION_KEYS",
    "Span",
    "from_otel_spans",
    "from_otlp_json",
    "from_otlp_span",
    "iter_otlp_json",
    "otlp_attributes",
    "to_otel_events",
    "trace_conversation",
    "write_otlp_json",
]
