"""A part of a docs page rendered from code: found between two marker lines, printed, or
written in place (``--write``). The kinds table and the routes table are two of them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def part(page: str, begin: str, end: str) -> str:
    """What ``page`` holds between the markers (and the markers), or "" if it has none."""
    start = page.find(begin)
    stop = page.find(end)
    if start < 0 or stop < start:
        return ""
    return page[start : stop + len(end)]


def main(argv: list[str], page_path: Path, render: Callable[[], str], begin: str, end: str) -> int:
    """Print what the page should hold; with ``--write``, put it there."""
    table = render()
    if "--write" not in argv:
        print(table)
        return 0
    page = page_path.read_text(encoding="utf-8")
    old = part(page, begin, end)
    if not old:
        print(f"{page_path}: no markers ({begin!r} ... {end!r})", file=sys.stderr)
        return 1
    page_path.write_text(page.replace(old, table), encoding="utf-8")
    return 0
