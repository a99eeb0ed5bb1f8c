"""docs/architecture.md's "Where each frame kind is handled" is the cores' routes as
tests/support/routes_table.py renders them, and every link of the kinds table has a handler."""

from __future__ import annotations

from dista_proto._kinds import KINDS

from .support.routes_table import DROPPED, PAGE, handlers, render, rendered_part, unhandled


def test_the_architecture_page_holds_the_rendered_table() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert rendered_part(page) == render(), (
        "docs/architecture.md's routes table differs from the cores' routes: "
        "run `python -m tests.support.routes_table --write`"
    )


def test_every_link_of_every_kind_is_taken_or_dropped_on_purpose() -> None:
    assert unhandled() == []


def test_what_is_dropped_on_purpose_has_no_handler() -> None:
    """An entry of `DROPPED` must not hide a route that exists (or came later)."""
    found = handlers()
    assert [key for key in DROPPED if found.get(key)] == []


def test_handlers_are_only_for_links_the_kinds_table_has() -> None:
    """A route for a link no sender may use would never run: the table would lie."""
    links = {(kind.number, s, r) for kind in KINDS for s, r, _ in kind.sent}
    assert sorted(set(handlers()) - links) == []
