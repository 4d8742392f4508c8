"""``turneval regrade``: re-score a stored run's judged metrics with another judge, and compare."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from turneval.errors import ConfigError


@dataclass
class Regrade:
    """What another judge says about the rows a stored run scored.

    Attributes:
        run_id: The stored run re-scored.
        new_run_id: The run the new judge's rows were kept as, in the same store.
        rows: Rows re-scored.
        flips: Per metric, the rows whose value changed: ``(index, id, old, new)``.
        agreement: Per metric, the calibration statistics of the new judge against the old
            (the old one in the place of the human labels), or None with fewer than 2 rows.
        usage: The new judge's usage (every request).
        cost: Its cost at the given prices (None without prices).
    """

    run_id: str
    new_run_id: str | None
    rows: int
    flips: dict[str, list[tuple[int, str | None, float, float]]] = field(default_factory=dict)
    agreement: dict[str, Any] = field(default_factory=dict)
    usage: Any = None
    cost: float | None = None

    def __str__(self) -> str:
        """A report: per metric, the agreement and the flips; then the cost."""
        lines = [f"regraded {self.rows} rows of run {self.run_id[:12]}"]
        for name, flips in self.flips.items():
            report = self.agreement.get(name)
            line = f"{name}: {len(flips)} of {self.rows} rows changed"
            if report is not None:
                label, value, _ = report.headline
                shown = "undefined" if value is None else f"{value:.3f}"
                line += f"; agreement {report.agreement:.3f}, {label} {shown}"
            lines.append(line)
            lines += [
                f"  row {index} ({sample_id or '-'}): {old:g} -> {new:g}"
                for index, sample_id, old, new in flips[:20]
            ]
            if len(flips) > 20:
                lines.append(f"  ... and {len(flips) - 20} more")
        if self.usage is not None:
            lines.append(
                f"new judge: {self.usage.calls} calls, {self.usage.input_tokens} input and "
                f"{self.usage.output_tokens} output tokens"
                + ("" if self.cost is None else f", cost {self.cost:.4f}")
            )
        return "\n".join(lines)


def _chosen(indexes: list[int], sample: int | None) -> list[int]:
    """``sample`` rows picked by a hash of their index (the same rows every time), or all."""
    if sample is None or sample >= len(indexes):
        return indexes
    ranked = sorted(indexes, key=lambda i: hashlib.sha256(str(i).encode()).digest())
    return sorted(ranked[:sample])


def regrade(
    store: Any,
    run_id: str | Any,
    llm: Any,
    *,
    sample: int | None = None,
    metrics: list[str] | None = None,
    prices: Any = None,
    options: Any = None,
    judge_config: Any = None,
    repeats: int | None = None,
) -> Regrade:
    """Re-score a stored run's judged metrics with ``llm`` and compare with the stored scores.

    Args:
        store: The :class:`~turneval.store.RunStore` holding the run; the new rows are kept
            there as a run named ``regrade <id> with <model>``.
        run_id: The run: its id or a unique prefix (read with
            :func:`turneval.runs.open_run`), or an :class:`~turneval.runs.OpenedRun` of it.
        llm: The new judge (a LangChain chat model).
        sample: Re-score this many rows, picked by a hash of their index (default: all).
        metrics: The judged metrics to re-score, by name (default: every judged metric).
        prices: Judge prices (:class:`~turneval.results.Prices`) for the cost, or None.
        options: Run options (concurrency, cache); their judge is replaced by ``llm``.
        judge_config: A :class:`~turneval.judge.JudgeConfig` the judged metric it names (or
            every judged metric) loads: the flips show what the new configuration changes.
        repeats: Ask each judged metric this many times per row (the mean, or the majority,
            of the votes: the CLI's ``--repeats``); None: as the run asked.

    Raises:
        ConfigError: the run is no stored run (a folder keeps no samples to score again), its
            metrics cannot be built again from its manifest, it has no judged metric (or none
            of ``metrics``), or no row with a stored sample.
    """
    from turneval.manifest import judge_model
    from turneval.metrics import JudgedMetric
    from turneval.pipeline import RunOptions, finish_recording, recording, score_batch
    from turneval.results import EvaluationResult
    from turneval.runs import OpenedRun, open_run

    opened = run_id if isinstance(run_id, OpenedRun) else open_run(run_id, store)
    if opened.stored is None or opened.manifest is None:
        raise ConfigError(
            f"regrade needs a stored run (the store keeps its samples); {opened.ref} is a "
            f"{opened.kind}: import it first (turneval store import)"
        )
    run = opened.stored
    built = opened.manifest.build_metrics()  # each without its judge: the new one judges
    judged = [m for m in built if isinstance(m, JudgedMetric)]
    if metrics is not None:
        unknown = sorted(set(metrics) - {m.name for m in judged})
        if unknown:
            raise ConfigError(
                f"run {run.id[:12]} has no judged metric {', '.join(unknown)} "
                f"(its judged metrics: {', '.join(m.name for m in judged) or 'none'})"
            )
        judged = [m for m in judged if m.name in metrics]
    if judge_config is not None:
        judged = [
            m.model_copy(update={"judge_config": judge_config})
            for m in judged
            if judge_config.metric in (None, m.name)
        ]
    if not judged:
        raise ConfigError(f"run {run.id[:12]} has no judged metric to regrade")
    if repeats is not None:
        from turneval.metrics._votes import with_vote_options

        judged = [
            m for m in with_vote_options(judged, repeats=repeats) if isinstance(m, JudgedMetric)
        ]
    records = {int(r["index"]): r for r in store.records(run.id)}
    scored = [
        i for i, r in sorted(records.items()) if any(r.get(m.name) is not None for m in judged)
    ]
    indexes = _chosen(scored, sample)
    samples = store.samples(run.id, indexes)
    items = [(i, samples[i]) for i in indexes if samples.get(i) is not None]
    if not items:
        raise ConfigError(
            f"run {run.id[:12]} keeps no sample for its scored rows: nothing to regrade"
        )
    options = (options or RunOptions()).replace(llm=llm, show_progress=False, store=store)
    run_options, recorder = recording(
        options, judged, name=f"regrade {run.id[:12]} with {judge_model(llm) or 'judge'}"
    )
    judge = run_options.judge_run()
    rows = score_batch(
        [item for _, item in items], judged, options=run_options.replace(on_row=None), judge=judge
    )
    for row, (index, _) in zip(rows, items, strict=True):
        row.index = index  # the stored run's row index, so the two runs line up
        if run_options.on_row is not None:
            run_options.on_row(row)
    names = [m.name for m in judged]
    result = EvaluationResult(rows, names, judge.usage)
    finish_recording(recorder, result)
    report = Regrade(run.id, result.store_run, len(rows), usage=judge.usage)
    if prices is not None:
        report.cost = float(prices.cost(judge.usage))
    for metric in judged:
        flips, old_values = [], {}
        for row in rows:
            old, new = records[row.index].get(metric.name), row.results.get(metric.name)
            if old is None or new is None:
                continue
            old_values[row.index] = float(old)
            if float(old) != float(new.value):
                flips.append(
                    (row.index, records[row.index].get("id"), float(old), float(new.value))
                )
        report.flips[metric.name] = flips
        report.agreement[metric.name] = _agreement(result, old_values, metric, rows)
    return report


def _agreement(result: Any, old: dict[int, float], metric: Any, rows: list[Any]) -> Any:
    """The calibration statistics of the new scores against the old, or None."""
    if len(old) < 2:
        return None
    from turneval.calibration import agreement

    labels = [old.get(row.index) for row in rows]  # the old judge in the place of the humans
    try:
        return agreement(result, labels, metric, resamples=200)
    except (ConfigError, ImportError, ValueError):  # a metric the statistics do not cover
        return None
