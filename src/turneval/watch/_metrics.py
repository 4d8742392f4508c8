"""``/metrics``: the watcher's counters in the Prometheus text format (prometheus-client)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from turneval.watch._watcher import Watcher


class _Collector:
    """Reads the counters at each scrape (no global registry: one per receiver)."""

    def __init__(self, watcher: Watcher, server: Any = None) -> None:
        self.watcher = watcher
        self.server = server

    def collect(self) -> Iterator[Any]:
        """The metric families, read under the watcher's lock."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        w = self.watcher
        with w.lock:
            counts, skipped, queued = dict(w.counts), dict(w.skipped), w.queued
            period = w.period_spend
        for name, doc in (
            ("spans_accepted", "Spans accepted (in the spool)"),
            ("spans_duplicate", "Spans received again (exporter retries), dropped"),
            ("spans_late", "Spans of a conversation already complete, dropped"),
            ("spans_invalid", "Spans without a valid trace id, dropped"),
            ("requests_rejected", "Exports refused with 503: the queue was full"),
            ("requests_unspooled", "Exports refused with 503: the spool could not be written"),
            ("requests_bad", "Exports refused with 400: unreadable body"),
            ("requests_too_large", "Exports refused with 413: over the size limit (decompressed)"),
            ("requests_failed", "Exports answered 500: an unexpected error"),
            ("connections_timed_out", "Connections closed: silent, or a request too slow"),
            ("connections_refused", "Connections answered 503: too many open"),
            ("conversations_complete", "Conversations complete (idle past the timeout)"),
            ("conversations_sampled", "Conversations in the sample (filters and rate)"),
            ("conversations_scored", "Conversations scored and written"),
            ("rows_failed", "Scored rows with a failed metric"),
            ("errors", "Scoring ticks that raised (decided again, or written, at the next)"),
        ):
            yield CounterMetricFamily(f"turneval_watch_{name}", doc, value=counts.get(name, 0))
        family = CounterMetricFamily(
            "turneval_watch_conversations_skipped",
            "Conversations not scored, by reason",
            labels=["reason"],
        )
        for reason, value in skipped.items():
            family.add_metric([reason], value)
        yield family
        yield CounterMetricFamily(
            "turneval_watch_judge_spend",
            "Judge spend under the budget, as the judge reported it (its unit: USD or tokens)",
            value=counts.get("judge_spend", 0.0),
        )
        yield GaugeMetricFamily(
            "turneval_watch_budget_period_spend",
            "Spend counted against the budget in its current period (estimates until scored)",
            value=period,
        )
        yield GaugeMetricFamily("turneval_watch_queue_depth", "Spans waiting", value=queued)
        yield from w.scores.families()  # issue 49: every metric's scores, for alert rules
        if self.server is not None:
            serving, waiting = self.server.connections
            yield GaugeMetricFamily(
                "turneval_watch_connections", "Connections served (a thread each)", value=serving
            )
            yield GaugeMetricFamily(
                "turneval_watch_connections_waiting",
                "Connections waiting for a thread",
                value=waiting,
            )


def exposition(watcher: Watcher, server: Any = None) -> tuple[bytes, str]:
    """The text of ``/metrics`` and its content type (``server``: its connections too)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(watcher, server))
    return generate_latest(registry), CONTENT_TYPE_LATEST
