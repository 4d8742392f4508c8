"""Two run folders, files or stored runs compared: read, their datasets checked, compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any, cast

from turneval.errors import ConfigError
from turneval.manifest import RUN_FILE
from turneval.results import EvaluationResult
from turneval.runs import OpenedRun, open_run

if TYPE_CHECKING:
    from turneval.store import RunStore
from turneval.compare._compare import compare, metric_directions, thresholds_for
from turneval.compare._configs import check_metric_configs, metric_config_changes
from turneval.compare._pairing import row_key
from turneval.compare._result import Comparison, MetricComparison
from turneval.compare._text import names_in

__all__ = ["compare_files"]


def compare_files(
    baseline: str | PathLike[str],
    candidate: str | PathLike[str],
    *,
    pass_threshold: float = 0.5,
    pass_thresholds: Mapping[str, float] | None = None,
    allow_config_change: bool = False,
    allow_dataset_change: bool = False,
    store: RunStore | str | PathLike[str] | None = None,
) -> Comparison:
    """:func:`compare` two runs of one dataset (as ``turneval compare``).

    Each run is what :func:`turneval.runs.open_run` reads: a ``--out`` folder, a
    results.jsonl or a summary.json file, or a run kept in ``store`` (its id); with a summary
    and no rows beside it, only the means are compared. When both runs have their manifest
    (a run folder's ``run.json``, a stored run's record), a metric of one name configured
    differently in the two is refused unless ``allow_config_change``
    (:func:`check_metric_configs`); a folder without one (a run from before run.json) is
    compared unchecked.

    Two runs over different versions of kept datasets are refused unless
    ``allow_dataset_change``, naming both versions and the rows added, removed and changed. A
    run's input is a version when its content is kept as one (``turneval datasets add``): its
    run.json names it, or ``store`` (a :class:`~turneval.store.RunStore`) finds its digest.
    The rows come from ``store`` when it keeps both, else from the input files when they are
    still as the runs read them, else (added and removed only) from the runs' row ids. Inputs
    kept as no version (two agents' conversation files) are not checked.

    Raises:
        ConfigError: a path is missing or not a run, a run.json is not a run record, a shared
            metric is configured differently, the runs read different dataset versions, or
            the runs cannot be paired.
    """
    runs: list[OpenedRun] = []
    try:
        for ref in (baseline, candidate):
            runs.append(open_run(ref, store))
        # where dataset versions are looked up: the store given (opened), else a stored run's
        kept = cast("RunStore | None", store if hasattr(store, "dataset_of") else None)
        kept = kept or next((run.store for run in runs if run.store is not None), None)
        return _compare_runs(
            runs,
            pass_threshold,
            pass_thresholds,
            allow_config_change,
            allow_dataset_change,
            kept,
        )
    finally:
        for run in runs:
            run.close()


def _compare_runs(
    runs: Sequence[OpenedRun],
    pass_threshold: float,
    pass_thresholds: Mapping[str, float] | None,
    allow_config_change: bool,
    allow_dataset_change: bool,
    store: RunStore | None,
) -> Comparison:
    first, second = runs
    notes: list[str] = []
    for run in (first, second):
        if run.manifest_error is not None and not allow_config_change:
            raise ConfigError(
                f"{run.manifest_error}; compare with --allow-config-change to skip the "
                "configuration check"
            )
    manifests = [first.manifest, second.manifest]
    if manifests[0] is None or manifests[1] is None:
        without = [
            run.ref
            for run, manifest in zip((first, second), manifests, strict=True)
            if manifest is None
        ]
        notes.append(
            f"metric configurations not checked: no {RUN_FILE} for {' and '.join(without)}"
        )
    elif not allow_config_change:
        check_metric_configs(manifests[0].metrics, manifests[1].metrics)
    else:
        notes += [
            f"compared although configured differently: {change}"
            for change in metric_config_changes(manifests[0].metrics, manifests[1].metrics)
        ]
    notes += _dataset_notes(runs, allow_dataset_change, store)
    if first.has_rows and second.has_rows:
        results = [_rows(first), _rows(second)]
        lines = [
            row.line if row.line is not None else n for n, row in enumerate(results[0].rows, 1)
        ]
        paired = compare(
            results[0],
            results[1],
            pass_threshold=pass_threshold,
            pass_thresholds=pass_thresholds,
            lines=lines,
            allow_config_change=True,  # the manifests were checked above
        )
        paired.config_notes.extend(notes)
        return paired
    means = [first.means(), second.means()]
    shared = [name for name in means[0] if name in means[1]]
    if not shared:
        raise ConfigError("the two runs share no metric")
    thresholds = thresholds_for(pass_thresholds, shared)
    directions = metric_directions(shared)
    metrics = {}
    for name in shared:
        base, cand = means[0][name], means[1][name]
        diff = None if base is None or cand is None else cand - base
        metrics[name] = MetricComparison(
            name,
            base,
            cand,
            diff,
            None,
            0,
            pass_threshold=thresholds.get(name, pass_threshold),
            higher_is_better=directions[name],
        )
    return Comparison(
        metrics,
        pass_threshold,
        [name for name in means[0] if name not in shared],
        [name for name in means[1] if name not in shared],
        notes,
    )


def _rows(run: OpenedRun) -> EvaluationResult:
    """A run's rows; refused when it has none (an empty input file's run)."""
    result = run.result
    if not result.rows:
        raise ConfigError(f"{run.label} holds no rows: nothing to compare")
    return result


def _run_dataset(run: OpenedRun) -> dict[str, Any] | None:
    """The dataset version a run read, with its input's path (None: none recorded)."""
    dataset = None if run.manifest is None else run.manifest.dataset
    version = None if dataset is None else dataset.version
    if dataset is None or version is None or not version.get("digest"):
        return None
    return {**version, "path": dataset.path}


def _dataset_label(record: Mapping[str, Any]) -> str:
    digest = f"sha256 {str(record['digest'])[:12]}"
    if record.get("name") and record.get("version"):
        return f"{record['name']}@{record['version']} ({digest})"
    return digest


def _dataset_notes(runs: Sequence[OpenedRun], allow: bool, store: RunStore | None) -> list[str]:
    """Refuse runs over two versions of kept datasets (unless ``allow``: a note says so).

    A run's input is a dataset version when its content is kept as one (``turneval datasets
    add``): named in its manifest, or found by its digest in ``store``. Inputs that are not
    (conversation files of two agents, say) are not checked.
    """
    old, new = (_run_dataset(run) for run in runs)
    if old is None or new is None or old["digest"] == new["digest"]:
        return []
    for record in (old, new):
        found = store.dataset_of(record["digest"]) if store is not None else None
        if not record.get("name") and found is not None:
            record.update(name=found.name, version=found.version)
    named = [bool(record.get("name")) for record in (old, new)]
    if not any(named):
        return []
    if not all(named):
        which, other = ("baseline", "candidate") if named[0] else ("candidate", "baseline")
        return [
            f"dataset not checked: the {which} read {_dataset_label(old if named[0] else new)}, "
            f"the {other} an input kept as no dataset version "
            f"({_dataset_label(new if named[0] else old)})"
        ]
    change = (
        f"{_dataset_label(old)} -> {_dataset_label(new)}: {_dataset_change(old, new, runs, store)}"
    )
    if allow:
        return [f"compared although the dataset changed: {change}"]
    raise ConfigError(
        f"the runs read different versions of the dataset ({change}), so their rows do not "
        "all compare; compare anyway with --allow-dataset-change (allow_dataset_change=True)"
    )


def _dataset_change(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    runs: Sequence[OpenedRun],
    store: RunStore | None,
) -> str:
    """The rows added, removed and changed, from the best source at hand."""
    from turneval._dataset_rows import diff_files
    from turneval._files import file_digest

    if store is not None and all(store.dataset_of(r["digest"]) for r in (old, new)):
        return str(store.diff_datasets(old["digest"], new["digest"]).summary())
    files = [r.get("path") for r in (old, new)]
    if all(files) and all(
        file_digest(str(f)) == r["digest"] for f, r in zip(files, (old, new), strict=True)
    ):
        return diff_files(str(files[0]), str(files[1])).summary()
    if not all(run.has_rows for run in runs):
        return "rows not listed (a summary.json alone has no rows)"
    keys = [[row_key(row) for row in run.result.rows] for run in runs]
    before, after = set(keys[0]), set(keys[1])
    added = [str(k) for k in keys[1] if k not in before and k is not None]
    removed = [str(k) for k in keys[0] if k not in after and k is not None]
    return (
        f"{len(added)} added{names_in(added)}, {len(removed)} removed{names_in(removed)}; "
        "changed rows not known (neither version's rows are at hand: keep them with "
        "'turneval datasets add')"
    )
