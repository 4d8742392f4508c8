"""What the command line parses: metric specs, ``--max-failed``, typed argument values.

Every mistake raises :class:`UsageError` (exit code 2) or, for an argparse type, an
``argparse.ArgumentTypeError`` naming what was expected.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from turneval.metrics import Evaluator


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


def _split_options(options: str) -> list[str]:
    """Split ``key=value,key=value`` at the commas outside JSON brackets and strings."""
    items, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(options):
        if char == '"' and (index == 0 or options[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "[{":
            depth += 1
        elif not quoted and char in "]}":
            depth -= 1
        elif char == "," and not quoted and depth == 0:
            items.append(options[start:index])
            start = index + 1
    items.append(options[start:])
    return items


def _known_name(name: str, known: dict[str, type[Evaluator]]) -> str:
    """``name``, or the one built-in metric ragas calls so (``bleu_score`` is ``bleu``).

    An unknown name fails, suggesting the closest known names (as ``evaluate`` does: one
    resolution, :func:`turneval.metrics.resolve_metric_name`).
    """
    from turneval.errors import ConfigError
    from turneval.metrics import resolve_metric_name

    try:
        return resolve_metric_name(name, known, listing="run 'turneval metrics' for the list")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def run_name(name: str, names: Iterable[str] | None = None) -> str:
    """``name`` as turneval calls the metric (``bleu`` for ragas' ``bleu_score``).

    ``names`` are the run's metrics (None: every built-in). A name among them stays as it is;
    ragas' name of exactly one of them is mapped to it; anything else is returned as it is
    (the caller says what is wrong with it).
    """
    from turneval.metrics import builtin_metrics

    known = builtin_metrics()
    among = set(known if names is None else names)
    if name in among:
        return name
    meant = [key for key, cls in known.items() if name in cls.ragas_names and key in among]
    return meant[0] if len(meant) == 1 else name


def parse_metric(spec: str) -> Evaluator | str:
    """``NAME`` or ``NAME:key=value,key=value`` (values parsed as JSON when they can be)."""
    from turneval.metrics import builtin_metrics

    name, _, options = spec.partition(":")
    known = builtin_metrics()
    name = _known_name(name, known)
    if not options and known[name].buildable_by_name():
        return name
    config: dict[str, Any] = {}
    for item in _split_options(options) if options else []:
        key, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"metric option {item!r} in {spec!r} is not key=value")
        try:
            config[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            config[key.strip()] = value
    try:
        return known[name].model_validate(config)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(map(str, error["loc"]))
        if error["type"] == "missing":
            raise UsageError(
                f"metric {name!r} needs its option {where!r}: --metric {name}:{where}=VALUE"
            ) from exc
        raise UsageError(f"metric {spec!r}: {where}: {error['msg']}") from exc


def metric_list(specs: Sequence[str]) -> list[Evaluator | str]:
    """Every ``--metric`` spec parsed (see :func:`parse_metric`)."""
    return [parse_metric(spec) for spec in specs]


def max_failed(text: str) -> Callable[[int], float]:
    """``--max-failed``: a count ``N`` (``"3"``) or a fraction (``"0.05"``, ``"5%"``) of rows.

    Returns a function of the number of rows giving the number of failed rows allowed.
    """
    try:
        if text.endswith("%"):
            fraction = float(text[:-1]) / 100
        elif any(mark in text for mark in ".eE"):
            fraction = float(text)
        else:
            count = int(text)
            if count < 0:
                raise ValueError
            return lambda rows: count
    except ValueError:
        raise UsageError(
            f"--max-failed {text!r}: expected a count N >= 0, a fraction in [0, 1] or a "
            "percentage (e.g. 3, 0.05, 5%)"
        ) from None
    if not 0.0 <= fraction <= 1.0:
        raise UsageError(f"--max-failed {text!r}: a fraction must lie in [0, 1]")
    return lambda rows: fraction * rows


def fail_under_bars(items: Sequence[str], metrics: Sequence[Evaluator]) -> dict[str, float]:
    """``--fail-under NAME=VALUE`` items as bars by metric name, each on its metric's scale."""
    scales = {metric.name: metric.scale for metric in metrics}
    directions = {metric.name: metric.higher_is_better for metric in metrics}
    bars = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"--fail-under {item!r} is not NAME=VALUE")
        name = run_name(name, scales)
        if name not in scales:
            raise UsageError(
                f"--fail-under names {name!r}, which is not among the metrics {list(scales)}"
            )
        try:
            bar = float(value)
        except ValueError:
            raise UsageError(f"--fail-under {item!r}: {value!r} is not a number") from None
        if not directions[name]:  # a floor cannot gate a cost to keep down (issue 49)
            raise UsageError(
                f"--fail-under {item}: lower is better for {name}, so a floor does not gate it; "
                f"gate a rise with 'turneval compare BASE NEW --fail-on-regression {name}="
                f"MAX_RISE', or alert on it with 'turneval watch --alert \"{name} > "
                f"{bar:g} over 1h\"'"
            )
        low, high = scales[name]
        if not low <= bar <= high:
            raise UsageError(
                f"--fail-under {item}: {name} scores lie in [{low:g}, {high:g}]; "
                "a bar off that scale is always or never met"
            )
        bars[name] = bar
    return bars


def named_number(option: str, item: str, form: str) -> tuple[str | None, float]:
    """An ``option``'s ``[NAME=]NUMBER`` item: the name (None without one) and the number."""
    name, equals, value = item.rpartition("=")
    try:
        return (name if equals else None), float(value)
    except ValueError:
        raise UsageError(f"{option} {item!r}: expected {form}") from None


def bounded(
    parse: Callable[[str], float], bound: float, *, above: bool, what: str
) -> Callable[[str], float]:
    """An argparse type: ``parse(text)``, at least ``bound`` (or above it); errors name it."""

    def check(text: str) -> float:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (value > bound or (not above and value == bound)):  # NaN fails too
            limit = "above" if above else "at least"
            raise argparse.ArgumentTypeError(f"must be {limit} {bound:g}, got {text}")
        return value

    return check


def fraction(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


whole_number = bounded(int, 1, above=False, what="a whole number")

positive_number = bounded(float, 0, above=True, what="a number")


def duration(text: str) -> float:
    """An argparse type: seconds, as ``30``, ``30s``, ``5m`` or ``1h`` (above 0)."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1.0)
    try:
        value = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration (30s, 5m), got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value
