"""Speed figures are published in one place, benchmarks/README.md; other pages link to it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"\d[\d,.]*\s*(?:samples/s|MB\b)")


def test_readme_and_docs_quote_no_speed_figures() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    quoted = {
        str(page.relative_to(ROOT)): FIGURE.findall(page.read_text(encoding="utf-8"))
        for page in pages
    }
    assert {page: found for page, found in quoted.items() if found} == {}
    assert FIGURE.search((ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8"))
