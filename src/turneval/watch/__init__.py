"""Online evaluation: ``turneval watch`` scores production traces as they arrive.

An OTLP/HTTP receiver (``POST /v1/traces``, protobuf or JSON, gzip) assembles spans into
conversations, scores each once it is complete (an idle timeout), sampled and on a budget, and
writes the rows to the run store or a JSONL folder; accepted spans are spooled to disk first,
so a crash loses nothing, and a request is taken whole or not at all. The receiver is bounded
in body size (decompressed too), in time and in connections. :func:`regrade` re-scores a stored run with another judge and
reports judge-versus-judge agreement. Needs the ``watch`` extra. See ``docs/how-to/watch.md``.
"""

from turneval.watch._budget import Budget
from turneval.watch._intake import (
    BadRequestError,
    BodyTooLargeError,
    QueueFullError,
    SpoolUnavailableError,
)
from turneval.watch._regrade import Regrade, regrade
from turneval.watch._scoring import parse_filter, sampled
from turneval.watch._server import WatchServer, decode_body
from turneval.watch._watcher import Watcher

__all__ = [
    "BadRequestError",
    "BodyTooLargeError",
    "Budget",
    "QueueFullError",
    "Regrade",
    "SpoolUnavailableError",
    "WatchServer",
    "Watcher",
    "decode_body",
    "parse_filter",
    "regrade",
    "sampled",
]
