"""Typed result records: one metric on one sample, one sample, one run."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.judge.usage import Usage

if TYPE_CHECKING:
    import pandas as pd

    from turneval.aggregate import MetricSummary
    from turneval.samples import Sample

__all__ = [
    "EvaluationResult",
    "MetricFailure",
    "MetricResult",
    "Prices",
    "SampleResult",
    "json_line",
    "ratio",
]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """The detailed score of one metric on one sample.

    Attributes:
        name: The metric's name.
        value: The score, a finite float (in [0, 1] for every built-in but the 1-5 rubric judges).
        reason: How the score was reached, with its arithmetic (``precision=2/3=0.667 ...``).
        details: Structured evidence, e.g. which calls were matched.
        usage: Judge tokens and calls spent on this result (None for rule-based metrics).
    """

    name: str
    value: float
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None

    def __post_init__(self) -> None:
        """Reject non-finite values: a failure is recorded as an error, never as NaN."""
        if not math.isfinite(self.value):
            raise ValueError(f"metric {self.name!r} produced a non-finite value {self.value!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        usage = None if self.usage is None else self.usage.to_dict()
        return {
            "name": self.name,
            "value": self.value,
            "reason": self.reason,
            "details": self.details,
            "usage": usage,
        }


def ratio(label: str, numerator: int, denominator: int, value: float) -> str:
    """Format ``label=k/n=0.667`` as used in reasons."""
    return f"{label}={numerator}/{denominator}={value:.3f}"


@dataclass(frozen=True, slots=True)
class MetricFailure:
    """A metric that failed on one sample: the error's type and message, kept on the row."""

    name: str
    sample_index: int
    error_type: str
    message: str

    def __str__(self) -> str:
        """``"<ErrorType>: <message>"``."""
        return f"{self.error_type}: {self.message}"


@dataclass(slots=True)
class SampleResult:
    """Everything measured on one sample: a result or a failure per metric.

    When an agent was run on the sample (``EvalTask``), also its ``latency_s``, ``failure``
    (0/1) with ``agent_error``, its token usage ``agent_usage`` and ``steps`` (AI messages).
    """

    index: int
    sample: Sample | None
    results: dict[str, MetricResult] = field(default_factory=dict)
    failures: dict[str, MetricFailure] = field(default_factory=dict)
    latency_s: float | None = None  # set when an agent was run (EvalTask)
    failure: int | None = None
    agent_error: str | None = None
    agent_usage: Usage | None = None
    steps: int | None = None

    def score(self, name: str) -> float:
        """The metric's value, NaN where it failed (ragas' convention at this boundary)."""
        result = self.results.get(name)
        return result.value if result is not None else math.nan

    @property
    def usage(self) -> Usage:
        """Judge usage summed over this row's metrics."""
        return sum((r.usage for r in self.results.values() if r.usage is not None), Usage())

    def record(self, metric_names: list[str], *, details: bool = False) -> dict[str, Any]:
        """A flat, JSON-ready dict: ``<name>``, ``<name>_reason``, ``<name>_error`` per metric.

        Values are None where the metric failed; ``details=True`` adds ``<name>_details``.
        """
        record: dict[str, Any] = {"index": self.index}
        for name in metric_names:
            result, failure = self.results.get(name), self.failures.get(name)
            record[name] = result.value if result is not None else None
            record[f"{name}_reason"] = result.reason if result is not None else None
            record[f"{name}_error"] = str(failure) if failure is not None else None
            if details and result is not None:
                record[f"{name}_details"] = result.details
        if self.latency_s is not None:
            usage = self.agent_usage or Usage()
            record.update(
                latency_in_seconds=self.latency_s,
                failure=self.failure,
                agent_error=self.agent_error,
                agent_input_tokens=usage.input_tokens,
                agent_output_tokens=usage.output_tokens,
                agent_total_tokens=usage.total_tokens,
                steps=self.steps,
            )
        return record


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one line of JSON, whatever its strings (lone surrogates are escaped)."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \\uXXXX escapes keep the line valid UTF-8
        text = json.dumps(record, ensure_ascii=True, default=str)
    return text


@dataclass(frozen=True, slots=True)
class Prices:
    """Judge prices per one million tokens, to turn usage into cost."""

    input_per_million: float
    output_per_million: float

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage``."""
        return usage.cost(self.input_per_million, self.output_per_million)


class EvaluationResult:
    """The rows of a run, in input order, and their summaries."""

    def __init__(
        self, rows: list[SampleResult], metric_names: list[str], usage: Usage | None = None
    ) -> None:
        """Hold ``rows`` (one per input sample) scored with ``metric_names``.

        ``usage`` is the run's judge usage (every request, including those of failed rows).
        """
        self.rows = rows
        self.metric_names = metric_names
        self.usage = usage if usage is not None else Usage()

    def __len__(self) -> int:
        """Number of rows (= input samples)."""
        return len(self.rows)

    def __repr__(self) -> str:
        """Metric means at a glance."""
        means = ", ".join(
            f"{name}: {'n/a' if s.mean is None else f'{s.mean:.4f}'}"
            for name, s in self.summary().items()
        )
        return f"EvaluationResult({len(self.rows)} rows; {means})"

    def scores(self, name: str) -> list[float]:
        """One value per row for metric ``name``, NaN where it failed."""
        if name not in self.metric_names:
            raise KeyError(f"no metric named {name!r}; the run has {self.metric_names}")
        return [row.score(name) for row in self.rows]

    def summary(self) -> dict[str, MetricSummary]:
        """Per metric: mean, std (ddof=1), count (scored rows), failed, 95% CI and usage.

        When an agent was run, also ``latency_in_seconds`` (mean, std, ...), ``failure`` (its
        mean is the failure rate) and ``agent_total_tokens``.
        """
        from turneval.aggregate import summarize

        summaries = {}
        ran = [row for row in self.rows if row.latency_s is not None]
        if ran:
            summaries["latency_in_seconds"] = summarize(
                "latency_in_seconds", [r.latency_s or 0.0 for r in ran], 0
            )
            summaries["failure"] = summarize("failure", [float(r.failure or 0) for r in ran], 0)
            tokens = [float((r.agent_usage or Usage()).total_tokens) for r in ran]
            summaries["agent_total_tokens"] = summarize("agent_total_tokens", tokens, 0)
        for name in self.metric_names:
            results = [row.results[name] for row in self.rows if name in row.results]
            failed = sum(1 for row in self.rows if name in row.failures)
            usages = [result.usage for result in results if result.usage is not None]
            usage = sum(usages, Usage()) if usages else None
            summary = summarize(name, [r.value for r in results], failed, usage)
            choices = [r.details.get("choice") for r in results]
            if results and all(c in ("BASELINE", "CANDIDATE", "TIE") for c in choices):
                rates = {
                    "candidate_win_rate": choices.count("CANDIDATE") / len(choices),
                    "baseline_win_rate": choices.count("BASELINE") / len(choices),
                    "tie_rate": choices.count("TIE") / len(choices),
                }
                summary = replace(summary, extra=rates)
            summaries[name] = summary
        return summaries

    def cost(self, prices: Prices | Mapping[str, float]) -> float:
        """The run's judge cost: ``Prices`` or ``{"input": .., "output": ..}`` per 1M tokens."""
        if not isinstance(prices, Prices):
            prices = Prices(prices["input"], prices["output"])
        return prices.cost(self.usage)

    def records(self, *, details: bool = False) -> list[dict[str, Any]]:
        """One flat dict per row (see :meth:`SampleResult.record`)."""
        return [row.record(self.metric_names, details=details) for row in self.rows]

    def to_pandas(self) -> pd.DataFrame:
        """One row per sample in input order: values (NaN where failed), reasons, errors."""
        import pandas as pd

        records = self.records()
        frame: pd.DataFrame = pd.DataFrame(records)
        for name in self.metric_names:
            frame[name] = pd.Series(
                [math.nan if r[name] is None else r[name] for r in records], dtype=float
            )
            for column in (f"{name}_reason", f"{name}_error"):  # object: None stays None
                frame[column] = pd.Series([record[column] for record in records], dtype=object)
        return frame

    def to_jsonl(self, path: str | PathLike[str], *, details: bool = True) -> None:
        """Write one JSON object per row (failed values as ``null``), with details by default."""
        with Path(path).open("w", encoding="utf-8") as handle:
            for record in self.records(details=details):
                handle.write(json_line(record))
                handle.write("\n")

    @classmethod
    def from_jsonl(cls, path: str | PathLike[str]) -> EvaluationResult:
        """Read back the rows a run wrote (``to_jsonl`` or the CLI's results.jsonl).

        Samples are not stored there, so rows have ``sample=None``; values, reasons and errors
        are restored.
        """
        rows: list[SampleResult] = []
        names: list[str] = []
        with Path(path).open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if not names:
                    names = [key for key in record if f"{key}_reason" in record]
                row = SampleResult(int(record.get("index", number - 1)), None)
                for name in names:
                    if record.get(name) is not None:
                        row.results[name] = MetricResult(
                            name, float(record[name]), record.get(f"{name}_reason") or ""
                        )
                    elif record.get(f"{name}_error"):
                        error_type, _, message = str(record[f"{name}_error"]).partition(": ")
                        row.failures[name] = MetricFailure(name, row.index, error_type, message)
                rows.append(row)
        return cls(rows, names)

    def to_html(self, path: str | PathLike[str], *, title: str = "turneval report") -> None:
        """Write a self-contained HTML report (no network): summary, histograms, drill-down."""
        from turneval.report import render_html

        html = render_html(self, title=title)
        Path(path).write_text(html, encoding="utf-8", errors="backslashreplace")
