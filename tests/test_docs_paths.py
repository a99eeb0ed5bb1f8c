"""Every module the docs name exists: a path (``dista_runtime/_net/contract.py``), a dotted name
(``dista_runtime._hosts.engine.Engine``, an attribute included) or a link to another page
and its section (``protocol.md#recovery``). Modules move (the runtime went into wings); a
page that still names the old place sends a reader nowhere. CHANGELOG.md is history and
keeps the names it had."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
PACKAGES = r"(?:dista_runtime|dista_proto)"
PATH = re.compile(rf"\b{PACKAGES}(?:/\w+)+(?:\.py)?")
DOTTED = re.compile(rf"(?<![\w/.]){PACKAGES}(?:\.[A-Za-z_]\w*)+")
LINK = re.compile(r"\]\(([\w.-]+\.md)(?:#([\w-]+))?\)")


def _named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    return [
        (f"{page.relative_to(ROOT)}:{n}", m.group(0))
        for page in PAGES
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for m in pattern.finditer(line)
    ]


def _resolves(dotted: str) -> bool:
    """Whether the longest importable prefix of ``dotted`` has the rest as attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_module_path_in_the_docs_exists() -> None:
    missing = [f"{where}: {path}" for where, path in _named(PATH) if not (ROOT / path).exists()]
    assert missing == []


def test_every_dotted_name_in_the_docs_resolves() -> None:
    missing = [f"{where}: {name}" for where, name in _named(DOTTED) if not _resolves(name)]
    assert missing == []


def test_every_link_between_pages_finds_its_page_and_section() -> None:
    broken = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target, anchor in LINK.findall(text):
            other = page.parent / target
            if not other.exists():
                broken.append(f"{page.name}: {target}")
                continue
            headings = re.findall(r"^#+ (.+)$", other.read_text(encoding="utf-8"), re.MULTILINE)
            if anchor and anchor not in {_anchor(h) for h in headings}:
                broken.append(f"{page.name}: {target}#{anchor}")
    assert broken == []


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("dista_runtime._net.latch.Latch", True),
        ("dista_runtime._hosts.engine.Engine", True),
        ("dista_runtime._engine", False),  # a flat module of before the wings
        ("dista_runtime._net.contract.NoSuchName", False),
        ("dista_proto._head", True),
    ],
)
def test_the_check_tells_names_apart(name: str, found: bool) -> None:
    assert _resolves(name) is found
