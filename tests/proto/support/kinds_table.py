"""docs/wire.md's "Kinds at a glance" table, rendered from the kinds table's rows.

    python -m tests.proto.support.kinds_table           # print what the page should hold
    python -m tests.proto.support.kinds_table --write   # and put it there

tests/proto/test_kinds.py fails while the page holds anything else. A column is one entry
of `COLUMNS`: a header and what a row's cell says.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Final

from dista_proto import Role
from dista_proto._kinds import KINDS, SENT_BY, Kind
from tests.support import rendered

PAGE: Final = Path(__file__).resolve().parents[3] / "docs" / "wire.md"
BEGIN: Final = (
    "<!-- Rendered from the rows of dista_proto/_kinds.py by\n"
    "`python -m tests.proto.support.kinds_table --write`: edit the rows, not this table. -->"
)
END: Final = "<!-- End of the rendered kinds table. -->"
#: The order roles are named in, the head first.
ORDER: Final = (
    Role.HEAD,
    Role.DRIVER,
    Role.WORKER,
    Role.OBSERVER,
    Role.OBJECT_SERVER,
    Role.FETCHER,
)


def role_name(role: Role) -> str:
    return role.name.lower().replace("_", " ")


def notes() -> dict[str, int]:
    """Every reason a link has beyond the page's "sent by" column, numbered in table order."""
    numbered: dict[str, int] = {}
    for kind in KINDS:
        for link in kind.sent:
            if link.why != SENT_BY:
                numbered.setdefault(link.why, len(numbered) + 1)
    return numbered


def sent(kind: Kind) -> str:
    """``sender → receiver, receiver; ...``: a kind's links by sender, each link beyond the
    page's column marked with its note, requests and replies said so."""
    numbered = notes()
    by_sender: dict[Role, list[str]] = {}
    for sender, receiver, why in kind.sent:
        mark = f" [{numbered[why]}]" if why != SENT_BY else ""
        by_sender.setdefault(sender, []).append(role_name(receiver) + mark)
    # Senders that reach the same receivers, with the same marks, share one entry.
    groups: dict[tuple[str, ...], list[Role]] = {}
    for sender, receivers in by_sender.items():
        groups.setdefault(tuple(receivers), []).append(sender)
    parts = []
    for receivers, senders in groups.items():
        what = ""
        if kind.reply is not None:
            what = " (reply)" if senders == [Role.HEAD] else " (request)"
        names = ", ".join(role_name(s) for s in senders)
        parts.append(f"{names} → {', '.join(receivers)}{what}")
    return "; ".join(parts)


def received_by(kind: Kind) -> str:
    return ", ".join(role_name(r) for r in ORDER if r in kind.receivers)


#: (header, right-aligned, cell)
COLUMNS: Final[list[tuple[str, bool, Callable[[Kind], str]]]] = [
    ("Kind", True, lambda kind: str(kind.number)),
    ("Name", False, lambda kind: kind.name),
    ("Event", False, lambda kind: f"`{kind.event.__name__}`"),
    ("Sent (sender → receiver)", False, sent),
    ("Received by", False, received_by),
]


def render() -> str:
    """The table and its notes, between the markers."""
    cells = [[cell(kind) for _, _, cell in COLUMNS] for kind in KINDS]
    headers = [header for header, _, _ in COLUMNS]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    right = [r for _, r, _ in COLUMNS]

    def line(values: list[str]) -> str:
        padded = (
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        )
        return "| " + " | ".join(padded) + " |"

    rule = "| " + " | ".join(
        "-" * (w - 1) + ":" if r else "-" * w for w, r in zip(widths, right, strict=True)
    )
    lines = [BEGIN, "", line(headers), rule + " |", *(line(row) for row in cells), ""]
    lines.append('Links beyond the page\'s "sent by" column:')
    lines.append("")
    for why, n in notes().items():
        lines += textwrap.wrap(f"- [{n}] {why}.", 95, subsequent_indent="  ")
    return "\n".join([*lines, "", END])


def rendered_part(page: str) -> str:
    """What the page holds between the markers (and the markers), or "" if it has none."""
    return rendered.part(page, BEGIN, END)


def main(argv: list[str]) -> int:
    return rendered.main(argv, PAGE, render, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
