"""Can this judge be trusted? Agreement with human labels, and alignment from labeled examples.

* :func:`agreement` compares a judged metric's scores with human labels: exact agreement,
  Cohen's kappa (quadratic-weighted too on ordinal scales), balanced accuracy, precision, recall
  and F1 per class for binary judges, Spearman and Kendall correlations for scales, the mean bias
  (judge minus human), the confusion matrix, Krippendorff's alpha, and percentile bootstrap 95%
  intervals for kappa and agreement. The statistics are scikit-learn's, scipy's and the
  ``krippendorff`` package's (the ``calibration`` extra).
* :func:`krippendorff_alpha` measures agreement between several raters (judges or people).
* :func:`align` picks labeled examples from a training split (disagreements first, balanced over
  the labels), adds them to the judge's prompt and reports agreement before and after on the
  held-out split only.

Labels are on the metric's scale: the rubric's scores (1-5, 0/1, ...), 1/0 (or yes/no,
true/false, pass/fail) for yes/no judges, and CANDIDATE/TIE/BASELINE (1/0.5/0) for pairwise ones.
"""

from __future__ import annotations

import html
import json
import math
import numbers
import secrets
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.metrics.base import Metric
    from turneval.results import EvaluationResult
    from turneval.samples import Sample

__all__ = [
    "AgreementReport",
    "AlignedMetric",
    "ClassScores",
    "Label",
    "aalign",
    "agreement",
    "align",
    "krippendorff_alpha",
    "label_from_record",
    "load_labels",
    "render_agreement_html",
    "verdict_text",
]

_WORDS = {
    "yes": 1.0,
    "no": 0.0,
    "true": 1.0,
    "false": 0.0,
    "pass": 1.0,
    "fail": 0.0,
    "candidate": 1.0,
    "tie": 0.5,
    "baseline": 0.0,
}
_MAX_CLASSES = 20


def _need_extra() -> None:
    try:
        import krippendorff  # noqa: F401
        import scipy  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ImportError(
            "turneval.calibration needs the calibration extra: pip install 'turneval[calibration]'"
        ) from exc


@dataclass(frozen=True, slots=True)
class Label:
    """One human label: which row (``index`` or sample ``id``), for which metric, which value.

    Attributes:
        row: The row's index (int) or its sample id (``metadata["id"]``, str).
        value: The label on the metric's scale.
        metric: The metric it labels (None: the metric being checked).
        where: Where the label came from (``labels.jsonl line 3``), for error messages.
        reason: The person's reason, if given.
    """

    row: int | str
    value: float
    metric: str | None = None
    where: str = ""
    reason: str = ""


def _coerce(raw: Any, where: str) -> float:
    if isinstance(raw, bool | np.bool_):
        return 1.0 if raw else 0.0
    if isinstance(raw, numbers.Real) and math.isfinite(raw):  # numpy's integers too
        return float(raw)
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _WORDS:
            return _WORDS[word]
        try:
            value = float(word)
        except ValueError:
            pass
        else:
            if math.isfinite(value):
                return value
    raise ConfigError(
        f"{where}: label {raw!r} is not a score, yes/no, true/false, pass/fail or "
        "CANDIDATE/TIE/BASELINE"
    )


def load_labels(path: str | PathLike[str]) -> list[Label]:
    """Read a JSONL of ``{"index": 3, "metric": "fluency", "label": 4}`` (or ``"id"``).

    A ``null`` label is no label (the line is skipped), as None in a label column.

    Raises:
        ConfigError: naming the line, when a line is not JSON or lacks ``index``/``id`` or
            ``label``.
    """
    labels = []
    with Path(path).open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{Path(path).name} line {number}"
            try:
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{where}: not UTF-8 (byte 0x{line[exc.start]:02x} at offset {exc.start})"
                ) from None
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{where}: not JSON ({exc.msg}, column {exc.colno})") from None
            label = label_from_record(record, where)
            if label is not None:
                labels.append(label)
    return labels


def label_from_record(record: Any, where: str) -> Label | None:
    """The label a labels-file line holds (``{"index"|"id", "metric", "label", "reason"}``).

    None for a ``null`` label (not labeled). ``where`` names the line in errors.

    Raises:
        ConfigError: naming ``where``, when the record lacks ``index``/``id`` or ``label``, or
            the label is not a score or a known word.
    """
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: expected an object with index|id, metric and label")
    if "label" in record and record["label"] is None:
        return None  # null: not labeled (as None in a label column)
    row = record.get("index", record.get("id"))
    if isinstance(row, float) and row.is_integer():
        row = int(row)  # 3.0: pandas writes an index column with gaps as floats
    if isinstance(row, bool) or not isinstance(row, int | str):
        raise ConfigError(f"{where}: needs an integer 'index' or a string 'id' of the row")
    if "label" not in record:
        raise ConfigError(f"{where}: has no 'label'")
    metric = record.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{where}: 'metric' must be a metric name, got {metric!r}")
    value = _coerce(record["label"], where)
    return Label(row, value, metric, where, str(record.get("reason") or ""))


def _missing(value: Any) -> bool:
    """An unlabeled cell: None, NaN, or pandas' NA (a nullable column's missing value)."""
    if value is None or type(value).__name__ == "NAType":
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isnan(value)


def _row_key(key: Any) -> int | str:
    """A mapping's key: a row index (numpy's integers too, as a DataFrame's index gives)."""
    if isinstance(key, numbers.Integral) and not isinstance(key, bool | np.bool_):
        return int(key)
    return key  # type: ignore[no-any-return]


def _as_labels(labels: Any, rows: int) -> list[Label]:
    if isinstance(labels, str | PathLike):
        return load_labels(labels)
    if isinstance(labels, Mapping):
        return [
            Label(
                _row_key(key),
                _coerce(value, f"label for row {_row_key(key)!r}"),
                where=f"label for row {_row_key(key)!r}",
            )
            for key, value in labels.items()
            if value is not None
        ]
    if not isinstance(labels, Sequence) and hasattr(labels, "__len__"):
        labels = list(labels)  # a pandas Series or numpy array: a column
    if isinstance(labels, Sequence):
        if labels and all(isinstance(item, Label) for item in labels):
            return list(labels)
        if len(labels) != rows:
            raise ConfigError(
                f"a label column needs one label (or None) per row: got {len(labels)} labels "
                f"for {rows} rows"
            )
        return [
            Label(index, _coerce(value, f"label {index}"), where=f"label {index}")
            for index, value in enumerate(labels)
            if not _missing(value)
        ]  # None, NaN or pandas' NA: not labeled (a pandas column's missing values)
    raise ConfigError(
        "labels must be a column (one per row), a mapping from row index or sample id, a list "
        f"of Label, or a JSONL path; got {type(labels).__name__}"
    )


def _metric_class(metric: Metric | str) -> Any:
    from turneval.metrics.base import Metric
    from turneval.runner import metric_names

    if isinstance(metric, Metric):
        return metric
    return metric_names().get(metric)


def _scale_of(metric: Any) -> tuple[float, ...] | None:
    """The metric's own scale (rubric, pairwise, yes/no, ``scale_points``), or None."""
    if metric is None:
        return None
    if getattr(metric, "pairwise", False):
        return (0.0, 0.5, 1.0)
    rubric = getattr(metric, "rating_rubric", None)
    if rubric is None and isinstance(metric, type):
        info = getattr(metric, "model_fields", {}).get("rating_rubric")
        rubric = info.default if info is not None else None
    if isinstance(rubric, dict):
        return tuple(sorted({float(score) for score in rubric}))
    if getattr(metric, "yes_no", False):
        return (0.0, 1.0)
    points = getattr(metric, "scale_points", None)
    if points:
        return tuple(sorted(float(point) for point in points))
    return None


def _check_judged(metric: Any, name: str) -> None:
    if metric is not None and not getattr(metric, "uses_llm", False):
        raise ConfigError(
            f"metric {name!r} is not judged by an LLM: agreement and alignment apply to judged "
            "metrics (rubric judges, assessments, topic adherence, goal accuracy, ...)"
        )


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


def _finite(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _kappa(human: np.ndarray, judge: np.ndarray, classes: list[int], weights: Any) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined kappa (one class): reported as None
        return _finite(cohen_kappa_score(human, judge, labels=classes, weights=weights))


def _resampled_kappas(
    human: np.ndarray, judge: np.ndarray, classes: int, weights: str | None
) -> np.ndarray:
    """Cohen's kappa of every resample (row) at once: scikit-learn's formula, NaN if undefined.

    ``kappa = 1 - sum(W * O) / sum(W * E)`` over the confusion matrix ``O`` and the matrix
    ``E`` expected by chance, with ``W`` 0 on the diagonal and 1 (or ``(i - j)**2``) off it, as
    ``sklearn.metrics.cohen_kappa_score`` computes it; one ``bincount`` serves all resamples.
    """
    resamples = len(human)
    cells = (np.arange(resamples)[:, None] * classes + human) * classes + judge
    observed = np.bincount(cells.ravel(), minlength=resamples * classes * classes).reshape(
        resamples, classes, classes
    )
    totals = observed.sum(axis=(1, 2), keepdims=True)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :] / totals
    grid = np.arange(classes)
    weight = (
        (grid[:, None] - grid[None, :]) ** 2
        if weights == "quadratic"
        else (grid[:, None] != grid[None, :]).astype(float)
    )
    numerator = (weight * observed).sum(axis=(1, 2))
    denominator = (weight * expected).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas: np.ndarray = 1.0 - numerator / denominator
    kappas[denominator == 0] = np.nan
    return kappas


_BOOTSTRAP_CELLS = 1_000_000  # resampled rows drawn at once: bounds the bootstrap's memory


def _bootstrap(
    human: np.ndarray, judge: np.ndarray, classes: list[int], seed: int, resamples: int
) -> tuple[Interval | None, Interval | None, Interval | None]:
    """Percentile bootstrap 95% intervals of agreement, kappa and weighted kappa."""
    if len(human) < 2 or resamples < 1:
        return None, None, None
    rng = np.random.default_rng(seed)
    ordinal = len(classes) > 2
    chunk = max(1, _BOOTSTRAP_CELLS // len(human))
    agreements, kappas, weighted = [], [], []
    for start in range(0, resamples, chunk):
        picks = rng.integers(0, len(human), size=(min(chunk, resamples - start), len(human)))
        resampled_human, resampled_judge = human[picks], judge[picks]
        agreements.append(np.mean(resampled_human == resampled_judge, axis=1))
        kappas.append(_resampled_kappas(resampled_human, resampled_judge, len(classes), None))
        if ordinal:
            weighted.append(
                _resampled_kappas(resampled_human, resampled_judge, len(classes), "quadratic")
            )

    def interval(parts: list[np.ndarray]) -> Interval | None:
        values = np.concatenate(parts) if parts else np.array([])
        values = values[np.isfinite(values)]
        if not len(values):
            return None
        low, high = np.percentile(values, [2.5, 97.5])
        return float(low), float(high)

    return interval(agreements), interval(kappas), interval(weighted) if ordinal else None


def _statistics(
    name: str,
    human_values: Sequence[float],
    judge_values: Sequence[float],
    scale: tuple[float, ...],
    *,
    skipped: int = 0,
    seed: int = 0,
    resamples: int = 1000,
) -> AgreementReport:
    """Every statistic of judge vs human values already checked to lie on ``scale``."""
    _need_extra()
    import krippendorff
    from scipy import stats
    from sklearn.metrics import (
        accuracy_score,
        balanced_accuracy_score,
        confusion_matrix,
        precision_recall_fscore_support,
    )

    position = {value: index for index, value in enumerate(scale)}
    human = np.array([position[v] for v in human_values], dtype=np.int64)
    judge = np.array([position[v] for v in judge_values], dtype=np.int64)
    classes = list(range(len(scale)))
    ordinal = len(scale) > 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classes absent from the labels: sklearn warns
        balanced = float(balanced_accuracy_score(human, judge))
    per_class: dict[str, ClassScores] = {}
    if len(scale) == 2:
        precision, recall, f1, support = precision_recall_fscore_support(
            human, judge, labels=classes, zero_division=0
        )
        for index, value in enumerate(scale):
            per_class[f"{value:g}"] = ClassScores(
                float(precision[index]), float(recall[index]), float(f1[index]), int(support[index])
            )
    spearman = kendall = None
    if ordinal:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant input: undefined, reported as None
            spearman = _finite(stats.spearmanr(human_values, judge_values).statistic)
            kendall = _finite(stats.kendalltau(human_values, judge_values).statistic)
    matrix = confusion_matrix(human, judge, labels=classes)
    alpha = None
    if len(set(human_values) | set(judge_values)) > 1:
        alpha = _finite(
            krippendorff.alpha(
                reliability_data=[list(human_values), list(judge_values)],
                level_of_measurement="ordinal" if ordinal else "nominal",
                value_domain=list(scale),
            )
        )
    agreement_ci, kappa_ci, weighted_ci = _bootstrap(human, judge, classes, seed, resamples)
    return AgreementReport(
        metric=name,
        n=len(human),
        scale=scale,
        agreement=float(accuracy_score(human, judge)),
        agreement_ci=agreement_ci,
        kappa=_kappa(human, judge, classes, None),
        kappa_ci=kappa_ci,
        weighted_kappa=_kappa(human, judge, classes, "quadratic") if ordinal else None,
        weighted_kappa_ci=weighted_ci,
        balanced_accuracy=balanced,
        per_class=per_class,
        spearman=spearman,
        kendall=kendall,
        mean_bias=float(np.mean(np.asarray(judge_values) - np.asarray(human_values))),
        confusion=tuple(tuple(int(c) for c in row) for row in matrix),
        alpha=alpha,
        skipped=skipped,
    )


def _pick_metric(result: EvaluationResult, labels: list[Label], metric: Any) -> str:
    from turneval.metrics.base import Metric

    if isinstance(metric, Metric):
        name: str = metric.name
    elif isinstance(metric, str):
        name = metric
    else:
        named = sorted({label.metric for label in labels if label.metric is not None})
        candidates = [n for n in named if n in result.metric_names] or named
        if len(candidates) == 1:
            name = candidates[0]
        elif len(result.metric_names) == 1 and not named:
            name = result.metric_names[0]
        else:
            options = candidates or result.metric_names
            raise ConfigError(f"which metric? pass metric=... (one of {options})")
    if name not in result.metric_names:
        raise ConfigError(f"metric {name!r} is not in the results; they have {result.metric_names}")
    return name


def _row_of(label: Label, result: EvaluationResult, ids: dict[str, int]) -> int:
    where = label.where or f"label for row {label.row!r}"
    if isinstance(label.row, int):
        if not 0 <= label.row < len(result.rows):
            raise ConfigError(
                f"{where}: row index {label.row} is unknown; the results have rows "
                f"0-{len(result.rows) - 1}"
            )
        return label.row
    if label.row not in ids:
        hint = "" if ids else " (the rows carry no sample ids: label by index)"
        raise ConfigError(f"{where}: no row has sample id {label.row!r}{hint}")
    row = ids[label.row]
    if row < 0:  # several rows share the id (trials of one scenario, a repeated sample)
        rows = [i for i, r in enumerate(result.rows) if r.sample_id == label.row]
        raise ConfigError(
            f"{where}: sample id {label.row!r} names rows {', '.join(map(str, rows))}: "
            "label them by index"
        )
    return row


def _on_scale(value: float, scale: tuple[float, ...] | None) -> bool:
    return scale is None or value in scale


def _verdict(metric: Any, value: float, details: Any, scale: tuple[float, ...] | None) -> float:
    """The judge's verdict on its own scale: a repeated row's votes reduced onto the scale.

    A row judged ``repeats`` times holds the mean of its votes (say 0.333) unless the metric
    is categorical. Compared with a human label, it is the votes' majority for categorical
    and yes/no judges (ties: the lowest value, as ``repeats`` takes it), and the scale point
    nearest the mean of the votes for a rubric or another scale (ties: the lower point). Any other value off
    the scale is returned as it is (the caller refuses it).
    """
    if scale is None or value in scale:
        return value
    record = details.get("repeats") if isinstance(details, dict) else None
    votes = record.get("values") if isinstance(record, dict) else None
    if not isinstance(votes, list) or not votes:
        return value
    if not all(isinstance(v, (int, float)) and float(v) in scale for v in votes):
        return value
    if getattr(metric, "categorical", False) or getattr(metric, "yes_no", False):
        counts = Counter(float(v) for v in votes)
        top = max(counts.values())
        return min(v for v, count in counts.items() if count == top)
    mean = sum(float(v) for v in votes) / len(votes)
    return min(scale, key=lambda point: (abs(point - mean), point))


def agreement(
    result: EvaluationResult,
    labels: Any,
    metric: Metric | str | None = None,
    *,
    seed: int = 0,
    resamples: int = 1000,
) -> AgreementReport:
    """Compare a judged metric's scores in ``result`` with human labels of the same rows.

    Args:
        result: A run's results (``evaluate(...)`` or ``EvaluationResult.from_jsonl``).
        labels: Human labels: a column (a list, array or pandas Series: one value, or None/NaN
            for unlabeled, per row), a mapping from row index
            or sample id (``metadata["id"]``) to a value, a list of :class:`Label`, or the path
            of a JSONL of ``{"index"|"id": ..., "metric": ..., "label": ...}``.
        metric: The metric (name or object; an object gives its rubric's scale). None: the
            only metric in the results or in the labels.
        seed: Seed of the bootstrap.
        resamples: Bootstrap resamples for the 95% intervals.

    Raises:
        ConfigError: naming the label, for a label off the metric's scale, a label of an
            unknown row, a row labeled twice, a sample id several rows share, or a metric that
            is not judged.
    """
    _need_extra()
    entries = _as_labels(labels, len(result.rows))
    name = _pick_metric(result, entries, metric)
    known = _metric_class(metric if metric is not None and not isinstance(metric, str) else name)
    _check_judged(known, name)
    scale = _scale_of(known)
    ids: dict[str, int] = {}  # the sample's metadata["id"], or a results file's "id"
    for position, sample_id in enumerate(r.sample_id for r in result.rows):
        if sample_id is not None:
            ids[sample_id] = -1 if sample_id in ids else position  # -1: ambiguous
    human: list[float] = []
    judge: list[float] = []
    seen: dict[int, str] = {}
    skipped = 0
    others: dict[str, int] = {}  # labels of other metrics: ignored, named if nothing is left
    for label in entries:
        if label.metric is not None and label.metric != name:
            others[label.metric] = others.get(label.metric, 0) + 1
            continue
        where = label.where or f"label for row {label.row!r}"
        if not _on_scale(label.value, scale):
            values = ", ".join(f"{v:g}" for v in scale or ())
            if getattr(known, "yes_no", False):
                values = "a yes/no judge: 0 or no, 1 or yes"
            raise ConfigError(
                f"{where}: label {label.value:g} is outside the scale of {name!r} ({values})"
            )
        row = _row_of(label, result, ids)
        if row in seen:
            raise ConfigError(f"{where}: row {row} of {name!r} is already labeled ({seen[row]})")
        seen[row] = where
        scored = result.rows[row].results.get(name)
        if scored is None:
            skipped += 1
            continue
        verdict = _verdict(known, scored.value, scored.details, scale)
        if not _on_scale(verdict, scale):
            raise ConfigError(
                f"row {row}: the judge's {name!r} score {scored.value:g} is not on its scale"
            )
        human.append(label.value)
        judge.append(verdict)
    if not human:
        why = f": the judge failed on all {skipped} labeled rows" if skipped else ""
        if others and not seen:
            named = ", ".join(f"{metric!r} ({count})" for metric, count in sorted(others.items()))
            why = f": the labels name other metrics only: {named}"
        raise ConfigError(f"no labeled row of {name!r} has a judge score to compare{why}")
    if scale is None:
        scale = tuple(sorted(set(human) | set(judge)))
        if len(scale) > _MAX_CLASSES:
            raise ConfigError(
                f"metric {name!r} takes {len(scale)} distinct values; agreement needs a discrete "
                "scale (a rubric, yes/no or pairwise judge)"
            )
    if len(scale) < 2:
        scale = (*scale, scale[0] + 1.0) if scale[0] == 0.0 else (0.0, *scale)
    return _statistics(name, human, judge, scale, skipped=skipped, seed=seed, resamples=resamples)


def krippendorff_alpha(
    ratings: Sequence[Sequence[float | None]],
    *,
    level: Literal["nominal", "ordinal", "interval", "ratio"] = "nominal",
) -> float:
    """Krippendorff's alpha between several raters (judges or people).

    Args:
        ratings: One sequence per rater, one value (None: not rated) per unit.
        level: ``"nominal"``, ``"ordinal"``, ``"interval"`` or ``"ratio"``.

    Raises:
        ConfigError: fewer than two raters, raters of different lengths, or no unit rated
            by two raters.
    """
    _need_extra()
    import krippendorff

    if len(ratings) < 2:
        raise ConfigError("Krippendorff's alpha needs at least two raters")
    lengths = {len(rater) for rater in ratings}
    if len(lengths) != 1:
        raise ConfigError(f"every rater needs one value per unit; got lengths {sorted(lengths)}")
    data = np.array(
        [[math.nan if v is None else float(v) for v in rater] for rater in ratings], dtype=float
    )
    if not np.any(np.sum(np.isfinite(data), axis=0) >= 2):
        raise ConfigError("Krippendorff's alpha needs a unit rated by at least two raters")
    if level not in {"nominal", "ordinal", "interval", "ratio"}:
        raise ConfigError(f"level must be nominal, ordinal, interval or ratio; got {level!r}")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def render_agreement_html(report: AgreementReport, *, title: str = "Judge agreement") -> str:
    """A self-contained HTML page: kappa with its interval and a confusion-matrix heatmap."""
    from turneval.report import _CSS

    def e(value: object) -> str:
        return html.escape(str(value), quote=True)

    nonce = secrets.token_urlsafe(16)
    name, kappa, interval = report.headline
    peak = max((count for row in report.confusion for count in row), default=0) or 1
    labels = [f"{value:g}" for value in report.scale]
    head = "".join(f"<th>{e(label)}</th>" for label in labels)
    body = []
    for label, row in zip(labels, report.confusion, strict=True):
        cells = []
        for column, count in zip(labels, row, strict=True):
            alpha = count / peak
            colour = "rgba(46,125,50,{:.2f})" if label == column else "rgba(198,40,40,{:.2f})"
            cells.append(
                f'<td class="num cell" data-count="{count}" '
                f'style="background:{colour.format(0.08 + 0.8 * alpha)}">{count}</td>'
            )
        body.append(f"<tr><th>{e(label)}</th>{''.join(cells)}</tr>")
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
    csp = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'"
    skipped = f"; {report.skipped} labeled rows failed and were skipped" if report.skipped else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{e(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{e(title)}</h1>
<p class="muted">metric {e(report.metric)}: {report.n} rows labeled by people{e(skipped)}</p>
<p id="headline"><b>{e(name)} = {_num(kappa)}</b> (95% CI {_interval(interval)})</p>
<table id="stats"><thead><tr><th>statistic</th><th>value</th><th>95% CI</th></tr></thead>
<tbody>{stats_rows}</tbody></table>
<h2>Confusion matrix</h2>
<p class="muted">rows: human label, columns: judge score</p>
<table id="confusion"><thead><tr><th>human \\ judge</th>{head}</tr></thead>
<tbody>{"".join(body)}</tbody></table>
<script nonce="{nonce}">document.body.setAttribute('data-ready', '1');</script>
</body></html>
"""


@dataclass(frozen=True)
class _Labeled:
    sample: Sample
    value: float
    reason: str = ""


def _labeled_items(labeled: Sequence[Any]) -> list[_Labeled]:
    from turneval.samples import MultiTurnSample, SingleTurnSample

    items = []
    for position, item in enumerate(labeled):
        if isinstance(item, tuple) and len(item) in (2, 3):
            sample, raw = item[0], item[1]
            reason = str(item[2]) if len(item) == 3 else ""
        else:
            raise ConfigError(
                f"labeled example {position}: expected (sample, label) or (sample, label, reason)"
            )
        if not isinstance(sample, SingleTurnSample | MultiTurnSample):
            raise ConfigError(
                f"labeled example {position}: expected a sample, got {type(sample).__name__}"
            )
        items.append(_Labeled(sample, _coerce(raw, f"labeled example {position}"), reason))
    return items


def verdict_text(metric: Any, label: float, reason: str = "") -> str:
    """How a human label is written as the worked example's verdict, on the metric's scale."""
    if getattr(metric, "pairwise", False):
        text = {
            1.0: "CANDIDATE (the candidate response is better)",
            0.0: "BASELINE (the baseline response is better)",
        }.get(label, "TIE (equally good)")
    elif getattr(metric, "rating_rubric", None):
        meaning = {float(k): v for k, v in metric.rating_rubric.items()}.get(label, "")
        text = f"score {label:g}" + (f" ({meaning})" if meaning else "")
    elif label in (0.0, 1.0):
        text = f"{label:g} ({'yes' if label else 'no'})"
    else:
        text = f"{label:g}"
    return f"{text}: {reason}" if reason else text


@dataclass
class AlignedMetric:
    """A judged metric aligned with human labels, and what the alignment did on held-out data.

    Attributes:
        metric: The judged metric carrying the worked examples (use it like any metric).
        before: Agreement of the original judge on the held-out split.
        after: Agreement of the aligned judge on the same held-out rows.
        train: Indices (into ``labeled``) of the training split.
        held_out: Indices of the held-out split (never shown to the judge).
        shown: Indices of the examples shown to the judge (a subset of ``train``).
    """

    metric: Any
    before: AgreementReport | None = None
    after: AgreementReport | None = None
    train: list[int] = field(default_factory=list)
    held_out: list[int] = field(default_factory=list)
    shown: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the metric's class and configuration (without its LLM), reports."""
        cls = type(self.metric)
        return {
            "metric_class": f"{cls.__module__}.{cls.__qualname__}",
            "config": self.metric.model_dump(mode="json", exclude={"llm"}),
            "before": None if self.before is None else self.before.to_dict(),
            "after": None if self.after is None else self.after.to_dict(),
            "train": self.train,
            "held_out": self.held_out,
            "shown": self.shown,
        }

    def save(self, path: str | PathLike[str]) -> None:
        """Write the aligned metric and its reports as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")

    @classmethod
    def load(
        cls, path: str | PathLike[str], *, llm: Any = None, metric_class: Any = None
    ) -> AlignedMetric:
        """Read an aligned metric back; ``llm`` is its judge (models are not saved).

        ``metric_class`` is needed for metrics defined outside turneval (only turneval's own
        classes are looked up by name).
        """
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if metric_class is None:
            metric_class = _builtin_class(str(data["metric_class"]))
        config = dict(data["config"])
        if llm is not None:
            config["llm"] = llm
        metric = metric_class.model_validate(config)
        return cls(
            metric,
            _report_from(data.get("before")),
            _report_from(data.get("after")),
            list(data.get("train", [])),
            list(data.get("held_out", [])),
            list(data.get("shown", [])),
        )


def _builtin_class(qualified: str) -> Any:
    import importlib

    from turneval.metrics._judged import JudgedMetric

    module, _, name = qualified.rpartition(".")
    if not module.startswith("turneval."):
        raise ConfigError(
            f"metric class {qualified!r} is not turneval's: pass metric_class=... to load it"
        )
    found = getattr(importlib.import_module(module), name, None)
    if not (isinstance(found, type) and issubclass(found, JudgedMetric)):
        raise ConfigError(f"{qualified!r} is not a judged metric class")
    return found


def _report_from(data: Any) -> AgreementReport | None:
    if data is None:
        return None

    def pair(value: Any) -> Interval | None:
        return None if value is None else (float(value[0]), float(value[1]))

    return AgreementReport(
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


def _choose(
    train: list[int], items: list[_Labeled], scores: dict[int, float | None], k: int
) -> list[int]:
    """Up to k training rows: disagreements first (largest first), then agreements.

    Each tier is taken in turn over the labels, so the examples are balanced over them.
    """

    def miss(index: int) -> float:
        score = scores.get(index)
        return math.inf if score is None else abs(score - items[index].value)

    labels = sorted({items[index].value for index in train})
    chosen: list[int] = []
    for disagreeing in (True, False):
        queues = [
            sorted(
                (i for i in train if items[i].value == label and (miss(i) > 0) == disagreeing),
                key=lambda i: (-miss(i), i),
            )
            for label in labels
        ]
        while len(chosen) < k and any(queues):
            for queue in queues:
                if queue and len(chosen) < k:
                    chosen.append(queue.pop(0))
    return chosen


async def aalign(
    metric: Any,
    labeled: Sequence[Any],
    *,
    k: int = 8,
    split: float = 0.5,
    seed: int = 0,
    llm: Any = None,
    cache: Any = None,
    max_concurrency: int = 8,
) -> AlignedMetric:
    """Async form of :func:`align`."""
    from turneval.metrics._judged import JudgedMetric
    from turneval.runner import aevaluate

    name = getattr(metric, "name", type(metric).__name__)
    if not isinstance(metric, JudgedMetric):
        raise ConfigError(f"metric {name!r} is not judged by an LLM: only judged metrics align")
    items = _labeled_items(labeled)
    if len(items) < 10:
        raise ConfigError(f"align needs at least 10 labeled examples of {name!r}, got {len(items)}")
    if not 0.0 < split < 1.0:
        raise ConfigError(f"split is the training share, in (0, 1); got {split}")
    if k < 1:
        raise ConfigError(f"k is the number of examples to show, at least 1; got {k}")
    scale = _scale_of(metric)
    for position, item in enumerate(items):
        if not _on_scale(item.value, scale):
            raise ConfigError(
                f"labeled example {position}: label {item.value:g} is outside the scale of "
                f"{name!r} ({', '.join(f'{v:g}' for v in scale or ())})"
            )
    order = np.random.default_rng(seed).permutation(len(items)).tolist()
    cut = min(max(1, round(len(items) * split)), len(items) - 1)
    train, held_out = sorted(order[:cut]), sorted(order[cut:])
    options = {"llm": llm, "cache": cache, "max_concurrency": max_concurrency}
    original = await aevaluate([item.sample for item in items], [metric], **options)

    def verdict(row: Any) -> float | None:
        scored = row.results.get(metric.name)
        return None if scored is None else _verdict(metric, scored.value, scored.details, scale)

    scores = {i: verdict(row) for i, row in enumerate(original.rows)}
    shown = _choose(train, items, scores, k)
    examples = tuple(
        metric.example(items[i].sample, verdict_text(metric, items[i].value, items[i].reason))
        for i in shown
    )
    aligned = metric.model_copy(update={"examples": (*metric.examples, *examples)})
    held = [items[i] for i in held_out]
    after_run = await aevaluate([item.sample for item in held], [aligned], **options)
    full_scale = scale or tuple(
        sorted(
            {item.value for item in items}
            | {v for v in scores.values() if v is not None}
            | {v for v in map(verdict, after_run.rows) if v is not None}
        )
    )

    def report(values: list[float | None]) -> AgreementReport:
        pairs = [(h.value, v) for h, v in zip(held, values, strict=True) if v is not None]
        if not pairs:
            raise ConfigError(f"the judge failed on every held-out example of {name!r}")
        for _, value in pairs:
            if value not in full_scale:
                raise ConfigError(f"the judge's {name!r} score {value:g} is not on its scale")
        return _statistics(
            name,
            [h for h, _ in pairs],
            [v for _, v in pairs],
            full_scale,
            skipped=len(held) - len(pairs),
            seed=seed,
        )

    before = report([scores[i] for i in held_out])
    after = report([verdict(row) for row in after_run.rows])
    return AlignedMetric(aligned, before, after, train, held_out, shown)


def align(
    metric: Any,
    labeled: Sequence[Any],
    *,
    k: int = 8,
    split: float = 0.5,
    seed: int = 0,
    llm: Any = None,
    cache: Any = None,
    max_concurrency: int = 8,
) -> AlignedMetric:
    """Align a judged metric with human labels through worked examples in its prompt.

    The labeled examples are split (``split`` for training, seeded shuffle); the original judge
    scores them all; up to ``k`` training examples are picked, disagreements first and balanced
    over the labels, and added to the judge's prompt. The aligned judge then scores the held-out
    split only, so no example is ever scored by a judge that was shown it; ``before`` and
    ``after`` are both measured on the held-out split.

    Args:
        metric: A judged metric (e.g. ``Fluency(llm=...)``).
        labeled: ``(sample, label)`` or ``(sample, label, reason)`` tuples, at least 10.
        k: Most examples shown to the judge.
        split: Share of the labeled examples used for training.
        seed: Seed of the split and of the bootstrap.
        llm: The judge model when the metric has none.
        cache: A :class:`~turneval.judge.SQLiteCache` for the judge calls.
        max_concurrency: Samples scored at once.

    Raises:
        ConfigError: the metric is not judged, fewer than 10 labeled examples, or a label off
            the metric's scale (naming the example).
    """
    from functools import partial

    from turneval.metrics.base import run_sync

    return run_sync(
        partial(
            aalign,
            metric,
            labeled,
            k=k,
            split=split,
            seed=seed,
            llm=llm,
            cache=cache,
            max_concurrency=max_concurrency,
        )
    )
