"""Check that every pin in constraints.txt installs on every Python the package declares.

For each ``name==version`` pin, reads the package index's simple page (PEP 503) for that
release's files and their ``requires-python``, and checks every ``Programming Language :: Python :: 3.X`` classifier of pyproject.toml:
the release must allow that Python and ship a file it can install (an sdist, a pure-Python
wheel, an abi3 wheel or a wheel for that CPython). Needs network access to pypi.org, so it is
not part of the test suite: run it (``make check-constraints``) after changing the pins.
"""

from __future__ import annotations

import re
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import tomllib
from packaging.markers import Marker
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)\s*(?:;\s*(.*))?$")


def declared_pythons() -> list[str]:
    """The ``3.X`` versions named by pyproject.toml's classifiers."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    prefix = "Programming Language :: Python :: "
    return [c[len(prefix) :] for c in project["classifiers"] if re.match(prefix + r"3\.\d+$", c)]


def pins() -> list[tuple[str, str, str]]:
    """(name, version, environment marker) of each pin."""
    found = []
    for line in (ROOT / "constraints.txt").read_text("utf-8").splitlines():
        match = PIN.match(line.split("#")[0].strip())
        if match:
            found.append((match[1], match[2], match[3] or ""))
    return found


def problems(pin: tuple[str, str, str], pythons: list[str]) -> list[str]:
    """What keeps ``pin`` from installing on each of ``pythons`` (empty: nothing)."""
    name, version, marker = pin
    url = f"https://pypi.org/simple/{name}/"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            page = answer.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return [f"{name}=={version}: the index answers {error.code} for {url}"]
    links = _Links()
    links.feed(page)
    mine = [item for item in links.files if _version_of(item["filename"], name) == version]
    if not mine:
        return [f"{name}=={version}: no such release on the index"]
    requires = {item.get("requires-python") or "" for item in mine}
    allowed = SpecifierSet(",".join(sorted(r for r in requires if r)))
    files = [item["filename"] for item in mine]
    found = []
    for python in pythons:
        where = {"python_version": python, "python_full_version": python + ".0"}
        if marker and not Marker(marker).evaluate(where):
            continue  # a pin for other Pythons (its environment marker says which)
        tag = "-cp" + python.replace(".", "") + "-"
        installable = any(
            f.endswith((".tar.gz", ".zip")) or "-none-any" in f or "abi3" in f or tag in f
            for f in files
        )
        if not allowed.contains(python + ".0", prereleases=True):
            found.append(f"{name}=={version}: requires Python {allowed}, not {python}")
        elif not installable:
            found.append(f"{name}=={version}: no file installs on Python {python}")
    return found


class _Links(HTMLParser):
    """The files of a simple-index page (PEP 503), each with its ``requires-python``."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[dict[str, str]] = []
        self._current: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            self._current = {"requires-python": found.get("data-requires-python") or ""}

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._current["filename"] = data.strip()
            self.files.append(self._current)
            self._current = None


def _version_of(filename: str, name: str) -> str | None:
    """The version in a wheel or sdist file name of project ``name`` (None if another's)."""
    normal = re.sub(r"[-_.]+", "_", name).lower()
    stem = re.sub(r"\.(tar\.gz|zip|whl)$", "", filename)
    head, _, rest = stem.partition("-")
    if re.sub(r"[-_.]+", "_", head).lower() != normal:
        return None
    return rest.split("-")[0]


def main() -> int:
    """Print each problem; exit 1 if there is any."""
    pythons = declared_pythons()
    with ThreadPoolExecutor(16) as pool:
        found = [p for batch in pool.map(lambda pin: problems(pin, pythons), pins()) for p in batch]
    for problem in found:
        print(problem)
    print(f"{len(pins())} pins checked on Python {', '.join(pythons)}: {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
