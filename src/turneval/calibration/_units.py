"""What an optimised judge is measured on: labeled rows, their units, the split, the verdicts.

A *row* is a sample with its human label: one value on the metric's scale (a row label), or,
for judges that rate items (turns, chunks, claims: a per-item verdict schema), one category per
item (``{"message_4": "irrelevant"}``: item labels). A *unit* is what one label labels: the row,
or one of its items. Agreement is counted over units; the split into optimisation and
validation rows is by row (a row's items never straddle the split), stratified by label.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

import numpy as np
from pydantic import BaseModel

from turneval.calibration._labels import coerce_label
from turneval.calibration._scales import judge_verdict, scale_of
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval._rows import MetricResult
    from turneval.metrics import JudgedMetric
    from turneval.samples import Sample

__all__ = [
    "LabeledRow",
    "Statistic",
    "Task",
    "item_verdicts",
    "labeled_rows",
    "stratified_split",
]

Statistic = Literal["kappa", "weighted kappa", "accuracy"]
"""The agreement an optimisation maximises: Cohen's kappa (yes/no judges, item categories),
quadratic-weighted kappa (ordinal scales of three points or more), accuracy (pairwise)."""

Value = float | str
"""A label or a verdict: a number on the row's scale, or an item's category."""


@dataclass(frozen=True)
class LabeledRow:
    """A sample with its human label: a row label, or a category per item.

    Attributes:
        sample: The sample.
        value: The row's label on the metric's scale (None when the items are labeled).
        items: Per item key (``message_4``), its category (empty for a row label).
        reason: The person's reason, if any (shown to the judge in worked examples and to the
            reflection model).
        ref: Where it came from (the run's row index or sample id), for reports.
    """

    sample: Sample
    value: float | None = None
    items: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    ref: str = ""

    def units(self) -> list[tuple[str | None, Value]]:
        """Its units: ``(None, value)`` for a row label, ``(item, category)`` per item."""
        if self.value is not None:
            return [(None, self.value)]
        return sorted(self.items.items())

    @property
    def stratum(self) -> Hashable:
        """The label the split is stratified by (an item-labeled row: its categories' counts)."""
        if self.value is not None:
            return self.value
        return tuple(sorted(Counter(self.items.values()).items()))


def labeled_rows(labeled: Sequence[Any]) -> list[LabeledRow]:
    """``(sample, label)`` or ``(sample, label, reason)`` tuples (or :class:`LabeledRow`) read.

    ``label`` is a value on the metric's scale (a number or yes/no, pass/fail, ...) or a dict
    of item labels (``{"message_4": "irrelevant"}``).

    Raises:
        ConfigError: naming the position, for another shape, a non-sample, an empty item dict
            or a value that is not a label.
    """
    from turneval.samples import MultiTurnSample, SingleTurnSample

    rows = []
    for position, item in enumerate(labeled):
        if isinstance(item, LabeledRow):
            rows.append(item)
            continue
        if not (isinstance(item, tuple) and len(item) in (2, 3)):
            raise ConfigError(
                f"labeled example {position}: expected (sample, label) or (sample, label, reason)"
            )
        sample, raw = item[0], item[1]
        reason = str(item[2]) if len(item) == 3 and item[2] is not None else ""
        if not isinstance(sample, SingleTurnSample | MultiTurnSample):
            raise ConfigError(
                f"labeled example {position}: expected a sample, got {type(sample).__name__}"
            )
        ref = str(position)
        if isinstance(raw, dict):
            if not raw:
                raise ConfigError(f"labeled example {position}: no item labels in the dict")
            bad = [key for key, value in raw.items() if not isinstance(value, str) or not value]
            if bad:
                raise ConfigError(
                    f"labeled example {position}: item labels are categories (text, e.g. "
                    f"'irrelevant'); item {bad[0]!r} has {raw[bad[0]]!r}"
                )
            rows.append(LabeledRow(sample, None, {str(k): v for k, v in raw.items()}, reason, ref))
        else:
            value = coerce_label(raw, f"labeled example {position}")
            rows.append(LabeledRow(sample, value, {}, reason, ref))
    return rows


def stratified_split(
    strata: Sequence[Hashable], share: float, seed: int
) -> tuple[list[int], list[int]]:
    """Indices split into optimisation and validation, stratified, seeded.

    Within each stratum (rows of one label), the rows are shuffled with the seed and
    ``round(n * share)`` go to validation; the remainders are balanced across strata so the
    validation share of the whole is ``round(N * share)`` (at least one row on each side when
    there are two or more rows). The same strata and seed give the same split.

    Returns:
        ``(optimisation, validation)``, each sorted.
    """
    if not 0.0 < share < 1.0:
        raise ConfigError(f"validation is the share of rows held out, in (0, 1); got {share}")
    total = len(strata)
    if total < 2:
        raise ConfigError(f"a split needs at least 2 labeled rows, got {total}")
    rng = np.random.default_rng(seed)
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for index, stratum in enumerate(strata):
        groups[stratum].append(index)
    order = sorted(groups, key=lambda key: (str(type(key)), str(key)))
    target = min(max(1, round(total * share)), total - 1)
    exact = {key: len(groups[key]) * target / total for key in order}
    taken = {key: math.floor(exact[key]) for key in order}
    # the largest remainders take the rows still missing (ties: the seeded order)
    ties = rng.permutation(len(order)).tolist()
    ranked = sorted(
        range(len(order)), key=lambda i: (-(exact[order[i]] - taken[order[i]]), ties[i])
    )
    for i in ranked[: target - sum(taken.values())]:
        taken[order[i]] += 1
    validation: list[int] = []
    for key in order:
        members = groups[key]
        shuffled = [members[i] for i in rng.permutation(len(members)).tolist()]
        validation += shuffled[: taken[key]]
    held = set(validation)
    return [i for i in range(total) if i not in held], sorted(validation)


def _item_fields(schema: type[BaseModel]) -> list[tuple[str, list[str]]]:
    """The per-item list fields of a verdict schema and their item keys, in order."""
    properties = schema.model_json_schema().get("properties", {})
    found = []
    for name, spec in properties.items():
        if isinstance(spec, dict) and spec.get("type") == "object" and "required" in spec:
            keys = [str(key) for key in spec["required"]]
            if keys and set(keys) == set(spec.get("properties", {})):
                found.append((name, keys))
    return found


def _category_of(entry: Any) -> str | None:
    """An item entry's category: its ``verdict`` field, else its first choice of texts."""
    if not isinstance(entry, BaseModel):
        return None
    fields = type(entry).model_fields
    names = ["verdict", *[name for name in fields if name != "verdict"]]
    for name in names:
        info = fields.get(name)
        if info is None or get_origin(info.annotation) is not Literal:
            continue
        value = getattr(entry, name)
        if all(isinstance(choice, str) for choice in get_args(info.annotation)):
            return str(value)
    return None


def item_categories(metric: JudgedMetric[Any], sample: Sample) -> tuple[str, ...]:
    """The categories the metric's per-item verdicts take on ``sample`` (empty: none)."""
    categories: list[str] = []
    for request in metric.judge_requests(sample):
        for name, _ in _item_fields(request.schema):
            annotation = request.schema.model_fields[name].annotation
            inner = get_args(annotation)
            item = get_args(inner[0])[0] if inner and get_args(inner[0]) else None
            if isinstance(item, type) and issubclass(item, BaseModel):
                for info in item.model_fields.values():
                    if get_origin(info.annotation) is Literal:
                        categories += [str(c) for c in get_args(info.annotation)]
                        break
    return tuple(dict.fromkeys(categories))


def item_verdicts(
    metric: JudgedMetric[Any], sample: Sample, details: dict[str, Any]
) -> dict[str, str]:
    """The judge's category for each item of ``sample``, read from a result's raw answers.

    The metric's requests are stated again (:meth:`~turneval.metrics.JudgedMetric.
    judge_requests`: what the run sent), and each answer kept in ``details["judge"]`` is
    parsed into its request's schema; every per-item list field (one entry per item key)
    gives its entries' ``verdict``. With ``repeats``, an item's votes are reduced to their
    majority (ties: the first category in order).
    """
    from turneval.judge._core import parse_json_reply

    requests = metric.judge_requests(sample)
    answers = details.get("judge") if isinstance(details, dict) else None
    if not isinstance(answers, list) or len(answers) != len(requests):
        return {}
    votes: dict[str, list[str]] = defaultdict(list)
    for request, answer in zip(requests, answers, strict=True):
        fields = _item_fields(request.schema)
        if not fields:
            continue
        try:
            parsed = parse_json_reply(str(answer.get("raw", "")), request.schema)
        except ValueError:  # pydantic's ValidationError is a ValueError
            continue
        for name, keys in fields:
            for key, entry in zip(keys, getattr(parsed, name), strict=False):
                category = _category_of(entry)
                if category is not None:
                    votes[key].append(category)
    return {key: Counter(found).most_common(1)[0][0] for key, found in votes.items()}


@dataclass
class Task:
    """A judged metric and its labeled rows: the scale, the statistic, each unit's verdict.

    Attributes:
        metric: The judged metric (its configuration is the starting point).
        rows: The labeled rows.
        per_item: True when the rows carry item labels.
        classes: The values agreement is counted over: the metric's scale (row labels) or the
            item categories, low to high as the metric declares them.
        statistic: What the optimisation maximises.
    """

    metric: Any
    rows: list[LabeledRow]
    per_item: bool = False
    classes: tuple[Value, ...] = ()
    statistic: Statistic = "kappa"

    @classmethod
    def of(cls, metric: Any, rows: list[LabeledRow]) -> Task:
        """The task of ``metric`` on ``rows``: its classes and statistic.

        Raises:
            ConfigError: rows mixing row and item labels, a row label off the metric's scale
                (naming the row), or fewer than two classes.
        """
        name = metric.name
        per_item = {row.value is None for row in rows}
        if len(per_item) > 1:
            raise ConfigError(
                f"the labels of {name!r} mix row labels and item labels: optimise on one kind"
            )
        if per_item == {True}:
            categories: list[str] = []
            for row in rows:
                categories += item_categories(metric, row.sample)
            categories += sorted({v for row in rows for v in row.items.values()})
            classes: tuple[Value, ...] = tuple(dict.fromkeys(categories))
            for row in rows:
                for item, value in row.items.items():
                    if value not in classes:  # pragma: no cover - classes hold every label
                        raise ConfigError(f"row {row.ref}: item {item} label {value!r} unknown")
            task = cls(metric, rows, True, classes, "kappa")
        else:
            scale = scale_of(metric)
            for row in rows:
                if scale is not None and row.value not in scale:
                    raise ConfigError(
                        f"labeled row {row.ref}: label {row.value:g} is outside the scale of "
                        f"{name!r} ({', '.join(f'{v:g}' for v in scale)})"
                    )
            values = scale or tuple(sorted({float(row.value or 0.0) for row in rows}))
            if metric.yes_no or len(values) == 2:
                statistic: Statistic = "kappa"
            elif metric.categorical:
                statistic = "accuracy"  # pairwise choices: BASELINE / TIE / CANDIDATE
            else:
                statistic = "weighted kappa"
            task = cls(metric, rows, False, tuple(values), statistic)
        if len(task.classes) < 2:
            raise ConfigError(
                f"the labels of {name!r} take one value only ({task.classes[0]!r}): agreement "
                "needs two or more"
            )
        return task

    def units(self, rows: Sequence[int]) -> list[tuple[int, str | None, Value]]:
        """The units of ``rows`` (indices into :attr:`rows`): ``(row, item, label)``."""
        return [(r, item, value) for r in rows for item, value in self.rows[r].units()]

    def verdicts(self, row: int, result: MetricResult | None) -> dict[str | None, Value | None]:
        """The judge's verdict on each unit of ``row`` (None: the judge failed on it)."""
        labeled = self.rows[row]
        keys = [item for item, _ in labeled.units()]
        if result is None:
            return dict.fromkeys(keys)
        if not self.per_item:
            scale = tuple(float(v) for v in self.classes)
            return {None: judge_verdict(self.metric, result.value, result.details, scale)}
        found = item_verdicts(self.metric, labeled.sample, result.details)
        return {key: found.get(key) for key in keys if key is not None}

    def closeness(self, label: Value, verdict: Value | None) -> float:
        """How close a verdict is to the label, in [0, 1]: GEPA's per-unit score.

        1 for agreement, 0 for a failure or a verdict off the classes; on an ordinal scale
        (weighted kappa), ``1 - ((i - j) / (k - 1))**2`` (the kappa's quadratic weights).
        """
        if verdict is None or verdict not in self.classes:
            return 0.0
        if self.statistic != "weighted kappa":
            return 1.0 if verdict == label else 0.0
        i, j = self.classes.index(label), self.classes.index(verdict)
        return 1.0 - ((i - j) / (len(self.classes) - 1)) ** 2

    def digest(self) -> str:
        """``sha256:<hex>`` of the labels (row references, units and reasons), in order."""
        payload = [[row.ref, row.units(), row.reason] for row in self.rows]
        text = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=True)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
