"""What the documentation cites exists: every file path, every `file.py::test_name`, every
link between pages. And the repository speaks of the software, not of how it was made."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FOLDERS = ("app", "bench", "tests", "alembic", "scripts")
SOURCES = sorted(
    path
    for folder in FOLDERS
    for path in (ROOT / folder).rglob("*")
    if path.suffix in (".py", ".sh", ".js", ".html")
    and "__pycache__" not in path.parts
    and not any(part.startswith(".venv") for part in path.parts)  # bench/.venv-trl: TRL's
)
PATH = re.compile(
    r"(?<![\w./-])((?:app|tests|bench|docs|scripts|alembic)/[\w./-]*\w\.(?:py|md|yml|jsonl|sh|example|png|toml|json|js|css|html))"
    r"(?:::(\w+))?"
)  # fmt: skip
TEST_REF = re.compile(r"(?<![\w/])(test_\w+\.py)::(\w+)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")
# How the work was done is not the software's business: no work periods, commits, issues,
# lent machines or internal tools in the repository's text.
HISTORY = re.compile(
    r"\bsession \d|\b(?:this|that|earlier|later|next|previous) session\b|\bsessions \d"
    r"|\bcommit [0-9a-f]{7,}\b|\bat commit\b|\bissue #?\d+|\bthe issue's\b"
    r"|\bwas lent\b|\blent to\b|\bDESIGN\.md\b|\bthe `?device`? tool\b",
    re.IGNORECASE,
)  # fmt: skip


def texts() -> Iterator[tuple[Path, str]]:
    for page in PAGES:
        yield page, page.read_text()
    for source in SOURCES:
        yield source, source.read_text(errors="replace")


def test_every_cited_path_and_test_exists() -> None:
    missing = []
    for where, text in texts():
        for path, test in PATH.findall(text):
            file = ROOT / path
            if not file.exists():
                missing.append(f"{where.relative_to(ROOT)}: {path}")
            elif test and not _defines(file, test):
                missing.append(f"{where.relative_to(ROOT)}: {path}::{test}")
        for name, test in TEST_REF.findall(text):
            files = list((ROOT / "tests").rglob(name))
            if not any(_defines(file, test) for file in files):
                missing.append(f"{where.relative_to(ROOT)}: {name}::{test}")
    assert not missing, "cited but not there:\n" + "\n".join(missing)


def test_every_link_between_pages_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_pages_link_to_each_other(page: Path) -> None:
    """Every page is reachable from the README, and every docs page links onwards."""
    readme = (ROOT / "README.md").read_text()
    if page.name != "README.md":
        assert f"docs/{page.name}" in readme, f"the README does not point to {page.name}"


def test_no_text_speaks_of_how_the_software_was_made() -> None:
    found = [
        f"{where.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for where, text in texts()
        if where.name != "test_docs.py"
        for m in HISTORY.finditer(text)
    ]
    assert not found, "\n".join(found)


# A log line (loguru's format) in a page: a benchmark's output pasted with its stderr.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \| ", re.MULTILINE)


def test_no_page_holds_a_programs_log_lines() -> None:
    found = [
        f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for page in PAGES
        for text in [page.read_text()]
        for m in LOG_LINE.finditer(text)
    ]
    assert not found, "\n".join(found)


def _defines(file: Path, name: str) -> bool:
    if file.suffix != ".py":
        return False
    tree = ast.parse(file.read_text())
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name == name
        for node in ast.walk(tree)
    )


def test_every_setting_is_documented() -> None:
    from app.core.config import Settings

    text = (ROOT / "docs" / "configuration.md").read_text()
    names = [f"QATUNE_{name.upper()}" for name in Settings.model_fields]
    assert [name for name in names if f"`{name}`" not in text] == []
