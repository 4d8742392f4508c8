"""The pytest plugin shipped with turneval (entry point ``pytest11``), loaded by pytest itself.

* ``@pytest.mark.turneval_dataset(path, argname="sample")`` runs a test once per sample of a
  JSONL file (relative paths are read next to the test file), with readable ids.
* Every judged metric scored by ``turneval.testing.assert_scores`` in the session shares one
  judge cache: ``--turneval-cache=PATH`` keeps it across sessions, otherwise it lives in a
  temporary folder for the session.
* ``--turneval-report=PATH`` writes one HTML report of every ``assert_scores`` call.

Importing this module imports nothing beyond the standard library: projects that have
turneval installed pay nothing for the plugin.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from turneval.judge import SQLiteCache
    from turneval.results import EvaluationResult

__all__ = [
    "TurnevalSession",
    "pytest_addoption",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_runtest_setup",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "pytest_unconfigure",
    "record",
    "session_state",
]

_SESSIONS: list[TurnevalSession] = []  # a stack: pytester runs sessions inside sessions


@dataclass
class TurnevalSession:
    """What the plugin keeps for one pytest session: the judge cache and the results.

    Attributes:
        cache_path: The judge cache file (None: a temporary one, made on first use).
        report_path: Where to write the session's HTML report (None: no report).
        results: Every ``assert_scores`` evaluation, with the test that made it.
    """

    cache_path: Path | None = None
    report_path: Path | None = None
    results: list[tuple[str, EvaluationResult]] = field(default_factory=list)
    current_test: str = ""
    report_written: bool = False
    _cache: SQLiteCache | None = None
    _folder: tempfile.TemporaryDirectory[str] | None = None

    def judge_cache(self) -> SQLiteCache:
        """The session's judge cache, opened on first use."""
        from turneval.judge import SQLiteCache

        if self._cache is None:
            path = self.cache_path
            if path is None:
                self._folder = tempfile.TemporaryDirectory(prefix="turneval-")
                path = Path(self._folder.name) / "judge-cache.sqlite"
            self._cache = SQLiteCache(path)
        return self._cache

    def combined(self) -> EvaluationResult:
        """Every recorded evaluation as one result, rows numbered in order, tests as ids.

        A row's id puts first what tells it apart (see :func:`_row_id`): the report's id
        column cuts long ids at the end, where the case of ``path::test[case]`` would be.
        """
        from turneval.judge import Usage
        from turneval.results import EvaluationResult, SampleResult
        from turneval.samples import sample_id

        names: list[str] = []
        rows: list[SampleResult] = []
        usage = Usage()
        for test, result in self.results:
            names += [name for name in result.metric_names if name not in names]
            usage = usage + result.usage
            cases = [
                None if row.sample is None else sample_id(row.sample, row.index)
                for row in result.rows
            ]
            repeated = Counter(cases)
            for number, (row, case) in enumerate(zip(result.rows, cases, strict=True), 1):
                sample = row.sample
                if sample is not None:
                    if repeated[case] > 1:  # two samples with one id: their positions
                        case = f"{case} #{number}"
                    own = case if len(result.rows) > 1 else None
                    metadata = {**(sample.metadata or {}), "id": _row_id(test, own)}
                    sample = sample.model_copy(update={"metadata": metadata})
                rows.append(SampleResult(len(rows), sample, dict(row.results), dict(row.failures)))
        return EvaluationResult(rows, names, usage)

    def write_report(self) -> bool:
        """Write the HTML report if one was asked for and anything was scored."""
        if self.report_path is None or not self.results:
            return False
        self.report_path.parent.mkdir(parents=True, exist_ok=True)
        self.combined().to_html(self.report_path, title="turneval: pytest session")
        return True

    def close(self) -> None:
        """Close the judge cache and drop the temporary one."""
        if self._cache is not None and hasattr(self._cache, "close"):
            self._cache.close()
        if self._folder is not None:
            self._folder.cleanup()


def _row_id(test: str, case: str | None = None) -> str:
    """``good · tests/test_a.py::test_x`` for ``tests/test_a.py::test_x[good]``.

    The parametrized case (the part of the test id in brackets, which tells a dataset's cases
    apart) comes first, then ``case`` (the sample's own id, when one test scored several),
    then the rest of the test id: every part of it is kept, the distinguishing one first.
    """
    base, bracket, params = test.partition("[")
    parts = [params[:-1]] if bracket and params.endswith("]") else []
    if not parts:
        base = test
    if case is not None:
        parts.append(case)
    return " · ".join([*parts, base])


def session_state() -> TurnevalSession | None:
    """The running pytest session's state, or None outside pytest."""
    return _SESSIONS[-1] if _SESSIONS else None


def record(result: EvaluationResult) -> None:
    """Keep ``result`` for the session's report (no-op outside pytest)."""
    state = session_state()
    if state is not None:
        state.results.append((state.current_test, result))


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--turneval-report`` and ``--turneval-cache``."""
    group = parser.getgroup("turneval")
    group.addoption(
        "--turneval-report",
        metavar="PATH",
        default=None,
        help="write one HTML report of every turneval assert_scores call in the session",
    )
    group.addoption(
        "--turneval-cache",
        metavar="PATH",
        default=None,
        help="judge cache (SQLite) shared by the session; default: a temporary one",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and open the session's state."""
    config.addinivalue_line(
        "markers",
        "turneval_dataset(path, argname='sample'): run the test once per sample of a JSONL "
        "dataset (path relative to the test file)",
    )
    config.addinivalue_line(
        "markers",
        "turneval_unreadable_dataset(reason): set by turneval on the one case of a "
        "turneval_dataset file that could not be read; the case errors with the reason",
    )
    report = config.getoption("--turneval-report", None)
    cache = config.getoption("--turneval-cache", None)
    _SESSIONS.append(
        TurnevalSession(
            cache_path=None if cache is None else Path(cache),
            report_path=None if report is None else Path(report),
        )
    )


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the session's state."""
    if _SESSIONS:
        _SESSIONS.pop().close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize tests marked ``turneval_dataset`` with the samples of their file."""
    marker = metafunc.definition.get_closest_marker("turneval_dataset")
    if marker is None:
        return
    from turneval.dataset import EvaluationDataset, distinct_sample_ids

    arguments: dict[str, Any] = dict(zip(("path", "argname"), marker.args[:2], strict=False))
    arguments.update(marker.kwargs)
    if "path" not in arguments:
        raise TypeError("@pytest.mark.turneval_dataset needs the dataset's path")
    argname = str(arguments.get("argname", "sample"))
    if argname not in metafunc.fixturenames:
        raise TypeError(
            f"@pytest.mark.turneval_dataset: {metafunc.function.__name__} has no argument "
            f"{argname!r} to receive the sample (pass argname=...)"
        )
    path = Path(arguments["path"])
    if not path.is_absolute():
        path = Path(metafunc.definition.path).parent / path
    from turneval.errors import InvalidSampleError

    try:
        samples = EvaluationDataset.from_jsonl(path).samples
        ids = distinct_sample_ids(samples)
    except (InvalidSampleError, OSError) as exc:
        # One case that errors with the reason: a collection error would stop the session.
        import pytest

        unread = pytest.mark.turneval_unreadable_dataset(f"{type(exc).__name__}: {exc}")
        metafunc.parametrize(argname, [pytest.param(None, marks=unread)], ids=["unreadable"])
        return
    metafunc.parametrize(argname, samples, ids=ids)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Remember which test is running (to name its rows in the report); fail unread cases."""
    unread = item.get_closest_marker("turneval_unreadable_dataset")
    if unread is not None:
        import pytest

        pytest.fail(f"turneval_dataset: {unread.args[0]}", pytrace=False)
    state = session_state()
    if state is not None:
        state.current_test = item.nodeid


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the session's report."""
    state = session_state()
    if state is not None:
        state.report_written = state.write_report()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say where the report was written."""
    state = session_state()
    if state is not None and state.report_written:
        rows = sum(len(result) for _, result in state.results)
        terminalreporter.write_line(
            f"turneval: report of {rows} scored samples: {state.report_path}"
        )
