"""Alerts on scored rows: ``turneval watch --alert 'goal_accuracy < 0.8 over 1h'``.

A rule (:class:`AlertRule`) reads ``[STAT(]METRIC[)] OP NUMBER over DURATION [min N rows]``:
the statistic (``mean`` by default; ``p50``, ``p90``, ``p95``, ``p99``, ``max``, ``min``,
``sum``) of a metric's values over the rows scored in the last DURATION (``30s``, ``15m``,
``1h``, ``1d``), compared with a number. Rows where the metric failed are counted apart, never
in the value; a window with fewer than ``min`` scored rows (1 by default) decides nothing.

:class:`Alerts` keeps each metric's recent values, evaluates every rule as rows are scored and,
when a rule starts to hold (*firing*) or stops holding over a window with enough rows
(*resolved*), sends an :class:`AlertEvent` to each sink: a log line (:class:`LogSink`), an
OpenTelemetry log event ``turneval.alert`` (:class:`OtelSink`, through ``--export-to``) and a
JSON POST to a webhook (:class:`WebhookSink`). Each event states the value, the window and
the rows it was computed over.

For teams that alert in Prometheus, ``turneval watch`` also exports every metric's scores as
a histogram (``turneval_watch_score{metric}``: ``_bucket``, ``_sum``, ``_count``;
:class:`ScoreHistograms`) and :func:`alert_rules` writes the rules as a Prometheus rule file
over it (``--write-alert-rules FILE``): a mean or sum from ``increase()`` of the sum and count,
a percentile from ``histogram_quantile`` over the buckets (as precise as they are).

Longer than 400 lines: the rule grammar, the window that evaluates it, the three sinks an
event goes to and the score histograms are read together when an alert changes; each part is
short.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import urllib.request
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

import numpy as np

from turneval._rows import SampleResult
from turneval.errors import ConfigError

__all__ = [
    "AlertEvent",
    "AlertRule",
    "AlertSink",
    "Alerts",
    "LogSink",
    "OtelSink",
    "SCORE_BUCKETS",
    "ScoreHistograms",
    "WebhookSink",
    "alert_rules",
]

logger = logging.getLogger("turneval.alerts")

_STATISTICS = ("mean", "p50", "p90", "p95", "p99", "max", "min", "sum")
_OPERATORS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_RULE = re.compile(
    r"^\s*(?:(?P<stat>[a-z0-9]+)\s*\(\s*(?P<wrapped>[A-Za-z_][\w.\-]*)\s*\)"
    r"|(?P<metric>[A-Za-z_][\w.\-]*))"
    r"\s*(?P<op><=|>=|<|>)\s*(?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"\s+over\s+(?P<window>(?:\d+(?:ms|s|m|h|d|w))+)"
    r"(?:\s+min\s+(?P<min>\d+)(?:\s+rows?)?)?\s*$"
)
_FORM = "[STAT(]METRIC[)] OP NUMBER over DURATION [min N rows], e.g. 'goal_accuracy < 0.8 over 1h'"


def _seconds(text: str) -> float:
    """A Prometheus-style duration (``1h30m``, ``15m``, ``500ms``) in seconds."""
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w)", text))


@dataclass(frozen=True)
class AlertRule:
    """One alert: a statistic of a metric over a time window, against a number.

    Attributes:
        text: The rule as written.
        metric: The metric's name.
        statistic: ``mean``, ``p50``, ``p90``, ``p95``, ``p99``, ``max``, ``min`` or ``sum``.
        op: ``<``, ``<=``, ``>`` or ``>=``: the alert holds when ``value OP threshold``.
        threshold: The number compared with.
        window: The window as written (``1h``), a Prometheus duration.
        window_s: The window in seconds.
        min_rows: Scored rows a window needs before it decides anything.
    """

    text: str
    metric: str
    statistic: str
    op: str
    threshold: float
    window: str
    window_s: float
    min_rows: int = 1

    @classmethod
    def parse(cls, text: str) -> AlertRule:
        """Read ``[STAT(]METRIC[)] OP NUMBER over DURATION [min N rows]``.

        Raises:
            ConfigError: naming what is wrong and the expected form.
        """
        found = _RULE.match(text)
        if found is None:
            raise ConfigError(f"alert {text!r} is not {_FORM}")
        statistic = found["stat"] or "mean"
        if statistic not in _STATISTICS:
            raise ConfigError(
                f"alert {text!r}: unknown statistic {statistic!r}; one of {', '.join(_STATISTICS)}"
            )
        window_s = _seconds(found["window"])
        if window_s <= 0:
            raise ConfigError(f"alert {text!r}: the window must be above 0")
        min_rows = int(found["min"]) if found["min"] is not None else 1
        if min_rows < 1:
            raise ConfigError(f"alert {text!r}: min rows must be at least 1")
        return cls(
            " ".join(text.split()),
            found["wrapped"] or found["metric"],
            statistic,
            found["op"],
            float(found["number"]),
            found["window"],
            window_s,
            min_rows,
        )

    def value(self, values: Sequence[float]) -> float:
        """The statistic of ``values`` (non-empty); percentiles are numpy's linear (type 7)."""
        if self.statistic == "mean":
            return float(np.mean(values))
        if self.statistic == "sum":
            return float(np.sum(values))
        if self.statistic == "max":
            return float(np.max(values))
        if self.statistic == "min":
            return float(np.min(values))
        return float(np.percentile(values, float(self.statistic[1:])))

    def holds(self, value: float) -> bool:
        """Whether ``value OP threshold``."""
        return bool(_OPERATORS[self.op](value, self.threshold))

    @property
    def name(self) -> str:
        """A Prometheus alert name: ``TurnevalGoalAccuracyMeanBelow0_8Over1h``."""
        words = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", self.metric))
        side = {"<": "Below", "<=": "AtMost", ">": "Above", ">=": "AtLeast"}[self.op]
        number = re.sub(r"[^0-9A-Za-z]", "_", f"{self.threshold:g}")
        return f"Turneval{words}{self.statistic.capitalize()}{side}{number}Over{self.window}"

    def promql(self) -> str:
        """The rule as a PromQL expression over ``turneval_watch_score`` (see the module).

        Raises:
            ConfigError: ``max`` and ``min`` have no form over a histogram (use p99 or p50).
        """
        selector = f'{{metric="{self.metric}"}}[{self.window}]'
        count = f"sum(increase(turneval_watch_score_count{selector}))"
        if self.statistic in ("max", "min"):
            raise ConfigError(
                f"alert {self.text!r}: {self.statistic} has no Prometheus form over the "
                "exported histogram; use a percentile (p99, p50) in a rule file"
            )
        if self.statistic == "mean":
            value = f"sum(increase(turneval_watch_score_sum{selector})) / {count}"
        elif self.statistic == "sum":
            value = f"sum(increase(turneval_watch_score_sum{selector}))"
        else:
            q = float(self.statistic[1:]) / 100
            value = (
                f"histogram_quantile({q:g}, sum by (le) "
                f"(increase(turneval_watch_score_bucket{selector})))"
            )
        return f"({value}) {self.op} {self.threshold!r} and {count} >= {self.min_rows}"


@dataclass(frozen=True)
class AlertEvent:
    """A rule that started (``firing``) or stopped (``resolved``) holding.

    Attributes:
        rule: The rule.
        state: ``firing`` or ``resolved``.
        value: The statistic over the window.
        rows: Rows scored in the window (the value's rows).
        failed: Rows in the window where the metric failed (not in the value).
        at: When it was decided (seconds since the epoch).
    """

    rule: AlertRule
    state: str
    value: float
    rows: int
    failed: int
    at: float

    @property
    def message(self) -> str:
        """``ALERT firing: goal_accuracy < 0.8 over 1h: mean 0.7333 over the last 1h ...``."""
        rule = self.rule
        prefix = "ALERT firing" if self.state == "firing" else "alert resolved"
        return (
            f"{prefix}: {rule.text}: {rule.statistic} {self.value:.4g} over the last "
            f"{rule.window} ({self.rows} row{'s' if self.rows != 1 else ''} scored, "
            f"{self.failed} failed)"
        )

    def to_dict(self) -> dict[str, Any]:
        """The event as the webhook sends it (JSON)."""
        rule = self.rule
        return {
            "alert": rule.text,
            "name": rule.name,
            "state": self.state,
            "metric": rule.metric,
            "statistic": rule.statistic,
            "op": rule.op,
            "threshold": rule.threshold,
            "window": rule.window,
            "window_s": rule.window_s,
            "min_rows": rule.min_rows,
            "value": self.value,
            "rows": self.rows,
            "failed": self.failed,
            "at": datetime.fromtimestamp(self.at, timezone.utc).isoformat(),
            "message": self.message,
        }


class AlertSink(Protocol):
    """Where alert events go."""

    def send(self, event: AlertEvent) -> None:
        """Send one event (never raises: a failed delivery is logged)."""

    def close(self) -> None:
        """Finish sending what is pending."""


class LogSink:
    """Each event as a log line (logger ``turneval.alerts``: a warning when firing)."""

    def send(self, event: AlertEvent) -> None:
        """Log the event's message."""
        level = logging.WARNING if event.state == "firing" else logging.INFO
        logger.log(level, event.message)

    def close(self) -> None:
        """Nothing pending."""


class OtelSink:
    """Each event as an OpenTelemetry log event ``turneval.alert`` (the watcher's exporter).

    Args:
        otel_logger: An OpenTelemetry ``Logger`` (``LoggerProvider.get_logger(...)``).
    """

    def __init__(self, otel_logger: Any) -> None:
        """Emit through ``otel_logger``."""
        self.otel_logger = otel_logger

    def send(self, event: AlertEvent) -> None:
        """Emit the event with its figures as attributes."""
        from opentelemetry._logs import LogRecord, SeverityNumber

        figures = event.to_dict()
        attributes = {
            f"turneval.alert.{key}": value
            for key, value in figures.items()
            if key not in ("message", "at") and value is not None
        }
        self.otel_logger.emit(
            LogRecord(
                timestamp=int(event.at * 1e9),
                event_name="turneval.alert",
                body=event.message,
                severity_number=SeverityNumber.WARN
                if event.state == "firing"
                else SeverityNumber.INFO,
                attributes=attributes,
            )
        )

    def close(self) -> None:
        """The provider sends what is pending when the watcher shuts it down."""


class WebhookSink:
    """Each event POSTed as JSON to a URL, from a thread of its own (never blocking scoring).

    Args:
        url: The webhook (``http://`` or ``https://``).
        timeout: Seconds a delivery may take; a failure is logged, never raised.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        """Check the URL; nothing is sent yet."""
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"alert webhook {url!r} is not an http:// or https:// URL")
        self.url, self.timeout = url, timeout
        self._threads: list[threading.Thread] = []
        self.delivered = 0
        self.failed = 0

    def send(self, event: AlertEvent) -> None:
        """POST the event (in the background)."""
        body = json.dumps(event.to_dict()).encode()
        thread = threading.Thread(target=self._post, args=(body,), daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _post(self, body: bytes) -> None:
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                answer.read()
            self.delivered += 1
        except Exception as exc:  # a webhook down must not stop the watch
            self.failed += 1
            logger.warning("alert webhook %s: delivery failed: %s", self.url, exc)

    def close(self) -> None:
        """Wait for the deliveries under way (each at most ``timeout`` seconds)."""
        for thread in self._threads:
            thread.join(self.timeout)
        self._threads = []


class Alerts:
    """Rules evaluated over the rows as they are scored; events to the sinks on a change.

    Args:
        rules: The rules (or their texts).
        sinks: Where events go (default: a log line).
    """

    def __init__(
        self, rules: Iterable[AlertRule | str], sinks: Sequence[AlertSink] | None = None
    ) -> None:
        """Parse the rules; no row is held yet."""
        self.rules = [r if isinstance(r, AlertRule) else AlertRule.parse(r) for r in rules]
        self.sinks: list[AlertSink] = list(sinks) if sinks is not None else [LogSink()]
        self.firing: dict[str, bool] = {rule.text: False for rule in self.rules}
        self.events: list[AlertEvent] = []
        self._values: dict[str, deque[tuple[float, float | None]]] = {
            rule.metric: deque() for rule in self.rules
        }
        self._horizon = {
            metric: max(r.window_s for r in self.rules if r.metric == metric)
            for metric in self._values
        }
        self.lock = threading.Lock()

    def check_metrics(self, names: Sequence[str]) -> None:
        """Refuse a rule on a metric the run does not compute (naming it and the run's)."""
        for rule in self.rules:
            if rule.metric not in names:
                raise ConfigError(
                    f"alert {rule.text!r} is on {rule.metric!r}, which is not among the "
                    f"metrics computed: {', '.join(names)}"
                )

    def observe(self, rows: Iterable[SampleResult], at: float) -> list[AlertEvent]:
        """Take rows scored at ``at`` (seconds since the epoch); the events they cause."""
        with self.lock:
            for row in rows:
                for metric, held in self._values.items():
                    result = row.results.get(metric)
                    if result is not None:
                        held.append((at, float(result.value)))
                    elif metric in row.failures:
                        held.append((at, None))
            changed = self._evaluate(at)
        for event in changed:
            for sink in self.sinks:
                try:
                    sink.send(event)
                except Exception as exc:  # a sink must not stop the watch
                    logger.warning("alert sink %s failed: %s", type(sink).__name__, exc)
        return changed

    def _evaluate(self, at: float) -> list[AlertEvent]:
        for metric, held in self._values.items():
            while held and held[0][0] <= at - self._horizon[metric]:
                held.popleft()
        changed = []
        for rule in self.rules:
            window = [v for t, v in self._values[rule.metric] if t > at - rule.window_s]
            scored = [v for v in window if v is not None]
            if len(scored) < rule.min_rows:
                continue
            value = rule.value(scored)
            holds = rule.holds(value)
            if holds == self.firing[rule.text]:
                continue
            self.firing[rule.text] = holds
            event = AlertEvent(
                rule, "firing" if holds else "resolved", value, len(scored),
                len(window) - len(scored), at,
            )  # fmt: skip
            self.events.append(event)
            changed.append(event)
        return changed

    def close(self) -> None:
        """Let every sink finish sending."""
        for sink in self.sinks:
            sink.close()


SCORE_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05),
    *(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0),
    *(1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0),
    *(1000.0, 2500.0, 5000.0, 10000.0, 25000.0, 100000.0),
    math.inf,
)
"""The histogram's bucket bounds: fine over [0, 1] (scores), then seconds, money, tokens."""


class ScoreHistograms:
    """Every metric's scored values as a Prometheus histogram (``turneval_watch_score``)."""

    def __init__(self, buckets: Sequence[float] = SCORE_BUCKETS) -> None:
        """Empty histograms with these bucket bounds (the last one +Inf)."""
        self.bounds = tuple(buckets)
        self.counts: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}
        self.lock = threading.Lock()

    def observe(self, rows: Iterable[SampleResult]) -> None:
        """Count the rows' scored values (failed metrics are not observed)."""
        with self.lock:
            for row in rows:
                for name, result in row.results.items():
                    counts = self.counts.setdefault(name, [0] * len(self.bounds))
                    value = float(result.value)
                    counts[next(i for i, b in enumerate(self.bounds) if value <= b)] += 1
                    self.sums[name] = self.sums.get(name, 0.0) + value

    def families(self) -> Iterator[Any]:
        """The histogram family for a Prometheus collector (cumulative buckets)."""
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(
            "turneval_watch_score",
            "Scored values of each metric (failed rows not observed)",
            labels=["metric"],
        )
        with self.lock:
            for name, counts in sorted(self.counts.items()):
                running, buckets = 0, []
                for bound, count in zip(self.bounds, counts, strict=True):
                    running += count
                    buckets.append(("+Inf" if math.isinf(bound) else f"{bound:g}", running))
                family.add_metric([name], buckets, self.sums[name])
        yield family


def alert_rules(rules: Sequence[AlertRule], *, group: str = "turneval") -> str:
    """The rules as a Prometheus rule file (YAML) over ``turneval_watch_score``.

    Raises:
        ConfigError: a rule has no Prometheus form (``max``, ``min``).
    """
    import yaml

    entries = [
        {
            "alert": rule.name,
            "expr": rule.promql(),
            "labels": {"source": "turneval", "metric": rule.metric},
            "annotations": {
                "summary": f"turneval: {rule.text}",
                "description": (
                    f"the {rule.statistic} of {rule.metric} over the last {rule.window} is "
                    f"{rule.op} {rule.threshold:g} (at least {rule.min_rows} rows scored), from "
                    "turneval watch's /metrics (turneval_watch_score); the alert's value is it"
                ),
            },
        }
        for rule in rules
    ]
    document = {"groups": [{"name": group, "rules": entries}]}
    return str(yaml.safe_dump(document, sort_keys=False, width=1000))
