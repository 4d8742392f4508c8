"""The one boundary where provider errors are classified: transient (retry) or not."""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["Classified", "classify"]

_TRANSIENT_NAMES = {
    "APITimeoutError",
    "APIConnectionError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
    "TimeoutException",
    "ConnectError",
    "ReadTimeout",
    "ConnectTimeout",
    "RemoteProtocolError",
}


@dataclass(frozen=True, slots=True)
class Classified:
    """Whether an error is worth retrying, and the delay the server asked for (seconds)."""

    transient: bool
    retry_after: float | None = None
    status: int | None = None


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(parsed.timestamp() - time.time(), 0.0)


def classify(error: BaseException) -> Classified:
    """Classify a judge call failure.

    Transient: timeouts (ours or the client's), connection errors, HTTP 429 (with its
    ``Retry-After``) and 5xx. Everything else, auth and bad-request errors included, is not
    retried.
    """
    if isinstance(error, TimeoutError):
        return Classified(True)
    status = getattr(error, "status_code", None)
    response = getattr(error, "response", None)
    if status is None and response is not None:
        status = getattr(response, "status_code", None)
    if isinstance(status, int):
        if status == 429:
            return Classified(True, _retry_after(response), status)
        return Classified(status >= 500, _retry_after(response) if status >= 500 else None, status)
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & _TRANSIENT_NAMES or isinstance(error, ConnectionError):
        return Classified(True)
    return Classified(False)
