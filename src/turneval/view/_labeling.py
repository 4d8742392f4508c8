"""The labeling queue and the scale a label must lie on: pure functions over a run store.

A person labels a run's rows one metric at a time, in one of three queues: ``all`` rows in
order, a ``random`` sample (:data:`QUEUE` rows, the same for the same seed), or
``disagree``: the rows whose latest label disagrees with the score, and the unstable rows,
first (of the first :data:`~turneval.view._queries.SCAN_MAX` rows). A label is refused unless it
lies on the metric's scale (:class:`LabelScale`), the one ``turneval calibrate`` checks.
"""

from __future__ import annotations

import contextlib
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from turneval.errors import ConfigError
from turneval.view._queries import SCAN_MAX

if TYPE_CHECKING:
    from turneval.store import RunStore, StoredRow, StoredRun

__all__ = [
    "QUEUE",
    "LabelScale",
    "declared_scale",
    "disagreement_queue",
    "label_value",
    "queue_row",
    "random_queue",
    "scale_of",
]

QUEUE = 50  # rows a random labeling queue draws


def random_queue(run: StoredRun, seed: int) -> list[int]:
    """:data:`QUEUE` row indexes drawn at random with ``seed`` (every row of a smaller run)."""
    return sorted(random.Random(seed).sample(range(run.rows), min(QUEUE, run.rows)))


def label_value(label: Any) -> float | None:
    """A label as a number: a bool or a number as it is, yes/pass/true 1, no/fail/false 0."""
    if label is None:
        return None
    if isinstance(label, bool):
        return float(label)
    if isinstance(label, (int, float)):
        return float(label)
    words = {"yes": 1.0, "pass": 1.0, "true": 1.0, "no": 0.0, "fail": 0.0, "false": 0.0}
    return words.get(str(label).lower())


def disagreement_queue(store: RunStore, run: StoredRun, metric: str) -> list[int]:
    """The rows to label first: a label on the other side of 0.5 than the score, or unstable.

    Then the other rows, each part in row order; of the first ``SCAN_MAX`` rows.
    """
    import numpy as np

    given = store.row_labels(run.id, metric)
    columns = store.columns(run.id, [metric], limit=SCAN_MAX)
    values, unstable = columns.values[metric], columns.unstable[metric]
    first: list[int] = []
    rest: list[int] = []
    for index, value, shaky in zip(columns.indexes.tolist(), values, unstable, strict=True):
        human = label_value(given.get(index))
        off = human is not None and bool(np.isfinite(value)) and (human >= 0.5) != (value >= 0.5)
        (first if off or shaky else rest).append(index)
    return first + rest


def queue_row(
    store: RunStore, run: StoredRun, position: int, order: list[int] | None
) -> tuple[StoredRow | None, int, int]:
    """The row at ``position`` of a queue: the row, the queue's length, the row's place.

    ``order`` is the queue's row indexes; None walks all rows in order by keyset (the
    place is then the row's index). The row is None past the end.
    """
    if order is None:
        found = (
            store.rows_page(run.id, after=position - 1, limit=1)
            if position
            else store.rows_page(run.id, limit=1)
        )
        current = found[0] if found else None
        return current, run.rows, position if current is None else current.index
    if position >= len(order):
        return None, len(order), position
    found = store.rows_at(run.id, [order[position]])
    return (found[0] if found else None), len(order), position


@dataclass(frozen=True)
class LabelScale:
    """The values labels of one metric may take: its scale's points (None: any score).

    The scale is the one ``turneval calibrate`` checks labels against: the built-in metric of
    that name, else the run's own metric class (as stored), else the scale the run's record
    declares for the metric (``"scale": [0, 1]`` in its entry of the run's metrics: a column
    written by something other than a metric, such as the scenario review's ``accept``),
    else none.
    """

    metric: str
    points: tuple[float, ...] | None
    judge: Any = None  # the metric object that names the points (label_text), if any

    def text(self, value: float) -> str:
        """How a point reads, its value first: ``1 (yes)``, ``score 4 (...)``, ``1: CANDIDATE``."""
        number = f"{value:g}"
        if self.judge is not None:
            with contextlib.suppress(Exception):
                text = " ".join(str(self.judge.label_text(value)).split())
                if text.startswith((number, f"score {number}")):
                    return text
                return f"{number}: {text}"
        elif self.points == (0.0, 1.0):  # a declared yes/no scale reads as a yes/no judge's
            return f"{number} ({'yes' if value else 'no'})"
        return number

    def allowed(self) -> str:
        """The allowed values, for a message: ``0 (no) or 1 (yes)``, ``1, 2, 3, 4 or 5``."""
        if self.points is None:
            return "a number, yes/no, true/false or pass/fail"
        shown = [self.text(v) for v in self.points]
        if any(len(text) > 80 for text in shown):  # a rubric's long sentences: the scores
            shown = [f"{v:g}" for v in self.points]
        return ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0]

    def keys(self) -> dict[str, float]:
        """The digit keys of the labeling page and the value each gives.

        Each point that is a digit is its own key (``0``, ``1``; ``1``-``5``); a scale with
        other points (``0, 0.5, 1``, ``-2``-``2``) takes the keys ``1``, ``2``, ... in order.
        """
        if self.points is None:
            return {str(digit): float(digit) for digit in range(10)}
        if all(float(v).is_integer() and 0 <= v <= 9 for v in self.points):
            return {str(int(v)): float(v) for v in self.points}
        return {str(key): float(v) for key, v in enumerate(self.points[:9], start=1)}

    def problem(self, label: Any) -> str | None:
        """Why ``label`` is refused (naming the allowed values), None when it is on the scale."""
        from turneval.calibration._labels import coerce_label
        from turneval.calibration._scales import on_scale

        try:
            value = coerce_label(label, "label")
        except ConfigError:
            return (
                f"label {label!r} is not a score or a known word; {self.metric!r} takes "
                f"{self.allowed()}"
            )
        if not on_scale(value, self.points):
            return f"label {label!r} is not on the scale of {self.metric!r}: {self.allowed()}"
        return None


def scale_of(run: StoredRun, metric: str) -> LabelScale:
    """The scale of ``metric``'s labels in ``run`` (see :class:`LabelScale`)."""
    from turneval.calibration._scales import metric_class
    from turneval.calibration._scales import scale_of as points_of
    from turneval.manifest import resolve_class
    from turneval.metrics.base import Evaluator

    known: Any = metric_class(metric)
    stored = next((m for m in run.metrics if m.get("name") == metric), None)
    if known is None:  # a metric named by the user: its stored class, when it is turneval's
        qualified = str((stored or {}).get("class") or "")
        if qualified.startswith("turneval."):  # either form; a module that moved is found
            with contextlib.suppress(Exception):
                found = resolve_class(qualified)
                if issubclass(found, Evaluator):
                    known = found
    try:
        points = points_of(known)
        judge: Any = known
        if points and isinstance(judge, type):  # a built-in class: its default names the points
            judge = cast(Any, judge).model_validate({})
    except Exception:  # a class that cannot be built without its configuration: no scale
        points, judge = None, None
    if not points:
        return LabelScale(metric, declared_scale(stored), None)
    return LabelScale(metric, points, judge)


def declared_scale(stored: Any) -> tuple[float, ...] | None:
    """The scale a run's record declares for a metric (``"scale"``: its points), or None.

    Only a list of two or more distinct finite numbers is a scale; anything else declares none.
    """
    declared = stored.get("scale") if isinstance(stored, dict) else None
    if not isinstance(declared, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for v in declared
    ):
        return None
    points = tuple(sorted({float(v) for v in declared}))
    return points if len(points) > 1 else None
