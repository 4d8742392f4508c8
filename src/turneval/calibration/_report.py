"""The agreement report: its statistics as a record, as plain text, as JSON and as an HTML page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from turneval._html import document, escape_text, file_policy, nonce

__all__ = ["AgreementReport", "ClassScores", "Interval", "render_agreement_html"]


@dataclass(frozen=True, slots=True)
class ClassScores:
    """Precision, recall and F1 of the judge for one class (a human label taken as truth).

    Attributes:
        precision: Share of the judge's verdicts of this class that people gave too.
        recall: Share of the people's labels of this class the judge found.
        f1: Their harmonic mean.
        support: Rows people labeled with this class.
    """

    precision: float
    recall: float
    f1: float
    support: int


Interval = tuple[float, float]


@dataclass(frozen=True, slots=True)
class AgreementReport:
    """How well a judge agrees with human labels on the same rows.

    Attributes:
        metric: The metric's name.
        n: Rows with both a label and a judge score.
        scale: The scale's values, low to high (the confusion matrix's order).
        agreement: Share of rows where judge and human gave the same value.
        agreement_ci: Its percentile bootstrap 95% interval.
        kappa: Cohen's kappa (None where undefined: a single class in both).
        kappa_ci: Its bootstrap 95% interval.
        weighted_kappa: Quadratic-weighted kappa (ordinal scales of 3+ values), else None.
        weighted_kappa_ci: Its bootstrap 95% interval.
        balanced_accuracy: Mean recall over the human labels' classes.
        per_class: Precision, recall and F1 per class (binary judges), keyed by the value.
        spearman: Spearman's rho (ordinal scales), None where undefined.
        kendall: Kendall's tau-b (ordinal scales), None where undefined.
        mean_bias: Mean of judge minus human.
        confusion: Counts, rows = human label, columns = judge score, in ``scale`` order.
        alpha: Krippendorff's alpha between judge and human (ordinal or nominal).
        skipped: Labeled rows the judge failed on (not counted in ``n``).
    """

    metric: str
    n: int
    scale: tuple[float, ...]
    agreement: float
    agreement_ci: Interval | None
    kappa: float | None
    kappa_ci: Interval | None
    weighted_kappa: float | None
    weighted_kappa_ci: Interval | None
    balanced_accuracy: float
    per_class: dict[str, ClassScores]
    spearman: float | None
    kendall: float | None
    mean_bias: float
    confusion: tuple[tuple[int, ...], ...]
    alpha: float | None
    skipped: int = 0

    @property
    def ordinal(self) -> bool:
        """True for scales of three or more values (weighted kappa and correlations apply)."""
        return len(self.scale) > 2

    @property
    def headline(self) -> tuple[str, float | None, Interval | None]:
        """The kappa to quote: weighted on ordinal scales, plain on binary ones, with its CI."""
        if self.ordinal:
            return "weighted kappa", self.weighted_kappa, self.weighted_kappa_ci
        return "kappa", self.kappa, self.kappa_ci

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every statistic."""
        return {
            "metric": self.metric,
            "n": self.n,
            "skipped": self.skipped,
            "scale": list(self.scale),
            "agreement": self.agreement,
            "agreement_ci": self.agreement_ci,
            "kappa": self.kappa,
            "kappa_ci": self.kappa_ci,
            "weighted_kappa": self.weighted_kappa,
            "weighted_kappa_ci": self.weighted_kappa_ci,
            "balanced_accuracy": self.balanced_accuracy,
            "per_class": {
                key: {
                    "precision": s.precision,
                    "recall": s.recall,
                    "f1": s.f1,
                    "support": s.support,
                }
                for key, s in self.per_class.items()
            },
            "spearman": self.spearman,
            "kendall": self.kendall,
            "mean_bias": self.mean_bias,
            "confusion": [list(row) for row in self.confusion],
            "alpha": self.alpha,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgreementReport:
        """The report :meth:`to_dict` wrote (as an aligned metric saves its ``before``, ``after``)."""

        def pair(value: Any) -> Interval | None:
            return None if value is None else (float(value[0]), float(value[1]))

        return cls(
            metric=data["metric"],
            n=data["n"],
            scale=tuple(data["scale"]),
            agreement=data["agreement"],
            agreement_ci=pair(data["agreement_ci"]),
            kappa=data["kappa"],
            kappa_ci=pair(data["kappa_ci"]),
            weighted_kappa=data["weighted_kappa"],
            weighted_kappa_ci=pair(data["weighted_kappa_ci"]),
            balanced_accuracy=data["balanced_accuracy"],
            per_class={k: ClassScores(**v) for k, v in data["per_class"].items()},
            spearman=data["spearman"],
            kendall=data["kendall"],
            mean_bias=data["mean_bias"],
            confusion=tuple(tuple(row) for row in data["confusion"]),
            alpha=data["alpha"],
            skipped=data.get("skipped", 0),
        )

    def __str__(self) -> str:
        """A plain-text report: statistics, intervals and the confusion matrix."""
        name, kappa, interval = self.headline
        lines = [
            f"agreement of {self.metric!r} with human labels on {self.n} rows"
            + (f" ({self.skipped} labeled rows failed and were skipped)" if self.skipped else ""),
            f"  {name:<18} {_num(kappa)}  95% CI {_interval(interval)}",
            f"  {'exact agreement':<18} {_num(self.agreement)}  95% CI "
            f"{_interval(self.agreement_ci)}",
        ]
        if self.ordinal:
            lines.append(f"  {'kappa (unweighted)':<18} {_num(self.kappa)}")
            lines.append(f"  {'spearman':<18} {_num(self.spearman)}")
            lines.append(f"  {'kendall tau-b':<18} {_num(self.kendall)}")
        lines += [
            f"  {'balanced accuracy':<18} {_num(self.balanced_accuracy)}",
            f"  {'krippendorff alpha':<18} {_num(self.alpha)}",
            f"  {'mean bias':<18} {self.mean_bias:+.3f} (judge minus human)",
        ]
        for key, scores in self.per_class.items():
            lines.append(
                f"  class {key}: precision={scores.precision:.3f} recall={scores.recall:.3f} "
                f"f1={scores.f1:.3f} (n={scores.support})"
            )
        labels = [f"{value:g}" for value in self.scale]
        width = max(6, *(len(label) for label in labels))
        lines.append("  confusion (rows: human, columns: judge)")
        lines.append("  " + " " * width + "".join(f" {label:>{width}}" for label in labels))
        for label, row in zip(labels, self.confusion, strict=True):
            lines.append(f"  {label:>{width}}" + "".join(f" {count:>{width}}" for count in row))
        return "\n".join(lines)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _interval(interval: Interval | None) -> str:
    return "n/a" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def render_agreement_html(report: AgreementReport, *, title: str = "Judge agreement") -> str:
    """A self-contained HTML page: kappa with its interval and a confusion-matrix heatmap."""
    e = escape_text
    token = nonce()
    name, kappa, interval = report.headline
    peak = max((count for row in report.confusion for count in row), default=0) or 1
    labels = [f"{value:g}" for value in report.scale]
    head = "".join(f"<th>{e(label)}</th>" for label in labels)
    matrix = []
    for label, row in zip(labels, report.confusion, strict=True):
        cells = []
        for column, count in zip(labels, row, strict=True):
            alpha = count / peak
            colour = "rgba(46,125,50,{:.2f})" if label == column else "rgba(198,40,40,{:.2f})"
            cells.append(
                f'<td class="num cell" data-count="{count}" '
                f'style="background:{colour.format(0.08 + 0.8 * alpha)}">{count}</td>'
            )
        matrix.append(f"<tr><th>{e(label)}</th>{''.join(cells)}</tr>")
    rows = [
        (name, f"{_num(kappa)}", _interval(interval)),
        ("exact agreement", _num(report.agreement), _interval(report.agreement_ci)),
        ("balanced accuracy", _num(report.balanced_accuracy), ""),
        ("Krippendorff's alpha", _num(report.alpha), ""),
        ("mean bias (judge - human)", f"{report.mean_bias:+.3f}", ""),
    ]
    if report.ordinal:
        rows += [
            ("kappa (unweighted)", _num(report.kappa), _interval(report.kappa_ci)),
            ("Spearman", _num(report.spearman), ""),
            ("Kendall tau-b", _num(report.kendall), ""),
        ]
    for key, scores in report.per_class.items():
        rows.append(
            (
                f"class {key}: precision / recall / F1",
                f"{scores.precision:.3f} / {scores.recall:.3f} / {scores.f1:.3f}",
                f"n={scores.support}",
            )
        )
    stats_rows = "".join(
        f'<tr><th>{e(a)}</th><td class="num">{e(b)}</td><td>{e(c)}</td></tr>' for a, b, c in rows
    )
    skipped = f"; {report.skipped} labeled rows failed and were skipped" if report.skipped else ""
    body = f"""<h1>{e(title)}</h1>
<p class="muted">metric {e(report.metric)}: {report.n} rows labeled by people{e(skipped)}</p>
<p id="headline"><b>{e(name)} = {_num(kappa)}</b> (95% CI {_interval(interval)})</p>
<table id="stats"><thead><tr><th>statistic</th><th>value</th><th>95% CI</th></tr></thead>
<tbody>{stats_rows}</tbody></table>
<h2>Confusion matrix</h2>
<p class="muted">rows: human label, columns: judge score</p>
<table id="confusion"><thead><tr><th>human \\ judge</th>{head}</tr></thead>
<tbody>{"".join(matrix)}</tbody></table>"""
    return document(title, body, token=token, policy=file_policy(token))
