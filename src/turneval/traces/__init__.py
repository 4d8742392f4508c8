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
    write_otlp_json,
)
from turneval.traces._genai import GENAI_SEMCONV_VERSION

__all__ = [
    "GENAI_SEMCONV_VERSION",
    "from_otel_spans",
    "from_otlp_json",
    "iter_otlp_json",
    "to_otel_events",
    "write_otlp_json",
]
