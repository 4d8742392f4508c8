"""The generated API reference documents every public name and every built-in metric.

The site is built with ``mkdocs build --strict`` (in a subprocess, with Ray made unimportable:
the reference is read from the source, not imported). ``make test`` builds it once in its
``docs`` step and points ``TURNEVAL_DOCS_SITE`` at it; a plain ``pytest`` builds it here.
The names documented are read from the site's ``objects.inv``: an entry of priority 1 is a
rendered heading (aliases and inherited members are listed with priority 2).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import turneval
from turneval.metrics.base import builtin_metrics

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "api").glob("*.md"))

_BUILD = """
import sys
sys.modules["ray"] = None  # the reference must build without Ray
from mkdocs.__main__ import cli
sys.argv = ["mkdocs", "build", "--strict", "--site-dir", sys.argv[1]]
cli()
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = os.environ.get("TURNEVAL_DOCS_SITE")
    if built:
        return Path(built)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _BUILD, str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def read_inventory(path: Path) -> dict[str, tuple[int, str]]:
    """Sphinx inventory v2: four header lines, then zlib'd ``name domain:role prio uri dispname``."""
    lines = path.read_bytes().split(b"\n", 4)
    assert lines[0] == b"# Sphinx inventory version 2"
    entries: dict[str, tuple[int, str]] = {}
    for line in zlib.decompress(lines[4]).decode().splitlines():
        name, _role, priority, uri, _display = line.split(" ", 4)
        entries[name] = (int(priority), uri)
    return entries


@pytest.fixture(scope="module")
def rendered(site: Path) -> dict[str, str]:
    """The objects with a heading of their own in the reference: path -> page."""
    return {
        name: uri.split("#")[0]
        for name, (priority, uri) in read_inventory(site / "objects.inv").items()
        if priority == 1
    }


def test_inventory_reader_reads_a_written_inventory(tmp_path: Path) -> None:
    body = "a.B py:class 1 api/a/#$ -\na.B.c py:method 2 api/a/#a.X.c -\n"
    header = b"# Sphinx inventory version 2\n# Project: x\n# Version: 0\n# zlib\n"
    (tmp_path / "objects.inv").write_bytes(header + zlib.compress(body.encode()))
    assert read_inventory(tmp_path / "objects.inv") == {
        "a.B": (1, "api/a/#$"),
        "a.B.c": (2, "api/a/#a.X.c"),
    }


def test_every_top_level_name_is_documented(rendered: dict[str, str]) -> None:
    missing = [name for name in turneval.__all__ if f"turneval.{name}" not in rendered]
    assert missing == []
    assert rendered["turneval.evaluate"] == "api/turneval/"


def test_every_builtin_metric_is_documented(rendered: dict[str, str]) -> None:
    metrics = builtin_metrics()
    # the registry is filled, presets made from data tables included: the check is not vacuous
    assert {"fluency", "correctness", "tool_call_f1", "trajectory_precision"} <= metrics.keys()
    missing = [
        f"{name} ({cls.__module__}.{cls.__qualname__})"
        for name, cls in metrics.items()
        if f"turneval.metrics.{cls.__qualname__}" not in rendered
    ]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_every_name_a_documented_module_exports_is_documented(
    page: Path, rendered: dict[str, str]
) -> None:
    modules = re.findall(r"^::: ([\w.]+)$", page.read_text(), flags=re.MULTILINE)
    assert modules, f"{page.name} documents no module"
    for module in modules:
        assert module in rendered
        exported = getattr(importlib.import_module(module), "__all__", [])
        missing = [name for name in exported if f"{module}.{name}" not in rendered]
        assert missing == [], f"{module} on {page.name}"


def test_every_reference_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [page.name for page in PAGES if f"api/{page.name}" not in nav] == []
