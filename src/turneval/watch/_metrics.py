"""``/metrics``: the watcher's counters in the Prometheus text format (prometheus-client)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from turneval.watch._watcher import Watcher


class _Collector:
    """Reads the counters at each scrape (no global registry: one per receiver)."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def collect(self) -> Iterator[Any]:
        """The metric families, read under the watcher's lock."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        w = self.watcher
        with w.lock:
            counts, skipped, queued = dict(w.counts), dict(w.skipped), w.queued
        for name, doc in (
            ("spans_accepted", "Spans accepted (in the spool)"),
            ("spans_duplicate", "Spans received again (exporter retries), dropped"),
            ("spans_late", "Spans of a conversation already complete, dropped"),
            ("spans_invalid", "Spans without a valid trace id, dropped"),
            ("requests_rejected", "Exports refused with 503: the queue was full"),
            ("requests_bad", "Exports refused with 400: unreadable body"),
            ("conversations_complete", "Conversations complete (idle past the timeout)"),
            ("conversations_sampled", "Conversations in the sample (filters and rate)"),
            ("conversations_scored", "Conversations scored and written"),
            ("rows_failed", "Scored rows with a failed metric"),
            ("errors", "Scoring batches that raised (retried after a restart)"),
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
            "Judge spend estimated against the budget (its unit: USD or tokens)",
            value=counts.get("judge_spend", 0.0),
        )
        yield GaugeMetricFamily("turneval_watch_queue_depth", "Spans waiting", value=queued)


def exposition(watcher: Watcher) -> tuple[bytes, str]:
    """The text of ``/metrics`` and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(watcher))
    return generate_latest(registry), CONTENT_TYPE_LATEST
