"""Online evaluation: ``turneval watch`` scores production traces as they arrive.

An OTLP/HTTP receiver (``POST /v1/traces``, protobuf or JSON, gzip) assembles spans into
conversations, scores each once it is complete (an idle timeout), sampled and on a budget, and
writes the rows to the run store or a JSONL folder; accepted spans are spooled to disk first,
so a crash loses nothing, and a request is taken whole or not at all. The receiver is bounded
in body size (decompressed too), in time and in connections. :func:`regrade` re-scores a stored run with another judge and
reports judge-versus-judge agreement. Alerts (:class:`Alerts`, ``--alert``) watch a metric over
a time window and fire as a log line, an OTLP event and a webhook; :func:`alert_rules` writes
them for Prometheus. Needs the ``watch`` extra. See ``docs/how-to/watch.md`` and
``docs/how-to/ops.md``.
"""

from turneval.watch._alerts import (
    AlertEvent,
    AlertRule,
    Alerts,
    AlertSink,
    LogSink,
    OtelSink,
    ScoreHistograms,
    WebhookSink,
    alert_rules,
)
from turneval.watch._budget import Budget
from turneval.watch._decode import decode_body
from turneval.watch._intake import (
    BadRequestError,
    BodyTooLargeError,
    QueueFullError,
    SpoolUnavailableError,
)
from turneval.watch._regrade import Regrade, regrade
from turneval.watch._scoring import parse_filter, sampled
from turneval.watch._server import WatchServer
from turneval.watch._watcher import Watcher

__all__ = [
    "AlertEvent",
    "AlertRule",
    "AlertSink",
    "Alerts",
    "BadRequestError",
    "BodyTooLargeError",
    "Budget",
    "LogSink",
    "OtelSink",
    "QueueFullError",
    "Regrade",
    "ScoreHistograms",
    "SpoolUnavailableError",
    "WatchServer",
    "Watcher",
    "WebhookSink",
    "alert_rules",
    "decode_body",
    "parse_filter",
    "regrade",
    "sampled",
]
