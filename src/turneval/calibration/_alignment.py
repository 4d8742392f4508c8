"""A judge aligned with human labels through worked examples in its prompt, checked on held-out data.

:func:`align` splits the labeled examples, shows the judge training examples it got wrong
first (balanced over the labels) and measures agreement before and after on the held-out split
only. :class:`AlignedMetric` holds the aligned metric and both reports, and saves them as JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np

from turneval.calibration._labels import LabeledExample, labeled_examples
from turneval.calibration._report import AgreementReport
from turneval.calibration._scales import judge_verdict, on_scale, scale_of, verdict_text
from turneval.calibration._statistics import agreement_statistics
from turneval.errors import ConfigError
from turneval.manifest import MetricSpec, class_path

__all__ = ["AlignedMetric", "aalign", "align"]


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
        """A JSON-ready dict: the metric as a run records it (without its judge), reports.

        ``metric`` is :meth:`MetricSpec.of(metric).to_dict()
        <turneval.manifest.MetricSpec.to_dict>`: its name, class path and configuration.
        """
        return {
            "metric": MetricSpec.of(self.metric).to_dict(),
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

        ``metric_class`` is needed for metrics defined outside turneval whose module is not
        imported (a file never makes turneval import a module of its choosing). Files saved
        before the run manifest (``metric_class`` and ``config`` keys) are read too.

        Raises:
            ConfigError: the class cannot be found, or is not a judged metric.
        """
        from turneval.metrics import JudgedMetric

        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if "metric" in data:
            spec = MetricSpec.from_dict(data["metric"], str(path))
        else:  # saved before the manifest: the class dotted, the configuration beside it
            config = dict(data["config"])
            spec = MetricSpec(str(config.get("name", "")), str(data["metric_class"]), config)
        found = metric_class if metric_class is not None else spec.metric_class()
        if not (isinstance(found, type) and issubclass(found, JudgedMetric)):
            raise ConfigError(f"{spec.class_path!r} is not a judged metric class")
        metric = replace(spec, class_path=class_path(found)).build(llm, classes=(found,))
        return cls(
            metric,
            _report(data.get("before")),
            _report(data.get("after")),
            list(data.get("train", [])),
            list(data.get("held_out", [])),
            list(data.get("shown", [])),
        )


def _report(data: Any) -> AgreementReport | None:
    return None if data is None else AgreementReport.from_dict(data)


def _choose(
    train: list[int], items: list[LabeledExample], scores: dict[int, float | None], k: int
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
    from turneval.metrics import JudgedMetric
    from turneval.runner import aevaluate

    name = getattr(metric, "name", type(metric).__name__)
    if not isinstance(metric, JudgedMetric):
        raise ConfigError(f"metric {name!r} is not judged by an LLM: only judged metrics align")
    items = labeled_examples(labeled)
    if len(items) < 10:
        raise ConfigError(f"align needs at least 10 labeled examples of {name!r}, got {len(items)}")
    if not 0.0 < split < 1.0:
        raise ConfigError(f"split is the training share, in (0, 1); got {split}")
    if k < 1:
        raise ConfigError(f"k is the number of examples to show, at least 1; got {k}")
    scale = scale_of(metric)
    for position, item in enumerate(items):
        if not on_scale(item.value, scale):
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
        return (
            None if scored is None else judge_verdict(metric, scored.value, scored.details, scale)
        )

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
        return agreement_statistics(
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
