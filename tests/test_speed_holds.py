"""The verdict of ``benchmarks/run_speed_holds.py`` (issue 44, Speed holds), on known numbers.

Only the arithmetic is tested here; the figures themselves are benchmarks, never timed tests.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "run_speed_holds.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_speed_holds", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


speed_holds = _script()


def test_verdict_on_hand_computed_rounds() -> None:
    # before 2.0, 2.2, 2.5 s: median 2.2, noise 2.5 / 2.0 = 1.25
    # after 2.6, 2.4, 2.5 s: median 2.5, ratio 2.5 / 2.2 = 1.136... <= 1.25: holds
    found = speed_holds.verdict([2.0, 2.2, 2.5], [2.6, 2.4, 2.5])
    assert found["before"] == 2.2
    assert found["after"] == 2.5
    assert abs(found["ratio"] - 2.5 / 2.2) < 1e-12
    assert found["noise"] == 1.25
    assert found["verdict"] == "holds"
    # after 2.9, 2.8, 3.0 s: median 2.9, ratio 2.9 / 2.2 = 1.318... > 1.25: slower
    assert speed_holds.verdict([2.0, 2.2, 2.5], [2.9, 2.8, 3.0])["verdict"] == "SLOWER"
    # faster always holds, even with no noise at all
    assert speed_holds.verdict([1.0, 1.0, 1.0], [0.5, 0.6, 0.7])["verdict"] == "holds"
    # one round has no spread: no verdict either way
    assert speed_holds.verdict([1.0], [2.0])["verdict"] == "one round: no noise"


@settings(max_examples=60, deadline=None)
@given(
    before=st.lists(st.floats(0.01, 100.0), min_size=2, max_size=7),
    factor=st.floats(0.1, 10.0),
)
def test_the_after_side_holds_exactly_within_the_before_noise(
    before: list[float], factor: float
) -> None:
    after = [value * factor for value in before]  # every round slower (or faster) by ``factor``
    found = speed_holds.verdict(before, after)
    noise = max(before) / min(before)
    assert abs(found["ratio"] - factor) <= 1e-9 * factor
    if factor <= noise * (1 - 1e-9):
        assert found["verdict"] == "holds"
    if factor >= noise * (1 + 1e-9):
        assert found["verdict"] == "SLOWER"


def test_the_markdown_table_has_one_line_per_figure_and_names_what_failed() -> None:
    rows = [
        {"label": "stream: CPU", "unit": "CPU s", **speed_holds.verdict([2.0, 2.0], [1.0, 1.0])},
        {"label": "ray", "error": "before: exit 1"},
    ]
    table = speed_holds.markdown(rows, ["Measured now."]).splitlines()
    assert table[0] == "Measured now."
    assert table[-2] == "| stream: CPU | CPU s | 2.000 | 1.000 | 0.50 | 1.00 | holds |"
    assert table[-1] == "| ray | - | - | - | - | - | not run: before: exit 1 |"
