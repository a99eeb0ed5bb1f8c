"""docs/architecture.md's "Where each frame kind is handled", rendered from the cores' routes.

    python -m tests.support.routes_table           # print what the page should hold
    python -m tests.support.routes_table --write   # and put it there

Every link of every kind (`dista_proto._kinds.KINDS`: sender, receiver) is one row, naming
the method of the receiving core that takes it and the module that method lives in. The
methods come from the cores themselves: the head's per-role route tables
(`Head._driver_routes`, `_worker_routes`, `_hosting_routes`, `_observer_routes`), the
driver's and worker's `_on_head` dispatch dicts, and, where a core tests a kind inline
rather than through a dict, the bound method that does (the end of `handlers`).
tests/test_routes_table.py fails while the page holds anything else, or while a link of the
kinds table has no handler.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import dista_proto as dp
from dista_proto import Role
from dista_proto import frame as F
from dista_proto._kinds import KINDS
from tests.support import rendered

ROOT: Final = Path(__file__).resolve().parents[2]
PAGE: Final = ROOT / "docs" / "architecture.md"
BEGIN: Final = (
    "<!-- Rendered from the cores' route tables by\n"
    "`python -m tests.support.routes_table --write`: edit the routes, not this table. -->"
)
END: Final = "<!-- End of the rendered routes table. -->"

Handler = Callable[..., Any]


def _cores() -> tuple[dp.Head, dp.Driver, dp.Worker, dp.Observer]:
    return (
        dp.Head(epoch=1, first_number=1),
        dp.Driver(registry_hash=0),
        dp.Worker(registry_hash=0, address=dp.Address("127.0.0.1", 1)),
        dp.Observer(),
    )


def handlers() -> dict[tuple[int, Role, Role], list[tuple[str, Handler]]]:
    """(kind, sender, receiver) -> [(when, the bound method that takes it)], from the cores."""
    head, driver, worker, observer = _cores()
    out: dict[tuple[int, Role, Role], list[tuple[str, Handler]]] = {}

    def put(
        table: dict[type[dp.Event], Handler], sender: Role, receiver: Role, when: str = ""
    ) -> None:
        for event, handler in table.items():
            out.setdefault((event.kind, sender, receiver), []).append((when, handler))

    put(head._driver_routes, Role.DRIVER, Role.HEAD)
    put(head._worker_routes, Role.WORKER, Role.HEAD)
    put(head._observer_routes, Role.OBSERVER, Role.HEAD)
    put(driver._on_head, Role.HEAD, Role.DRIVER)
    put(worker._on_head, Role.HEAD, Role.WORKER)
    # Tested inline, not through a dict: what each core's `_received` does by hand.
    hosting = head._hosting_routes
    for event, handler in hosting.items():  # a hosting worker's own routes
        if head._worker_routes.get(event) != handler:
            out[(event.kind, Role.WORKER, Role.HEAD)].append(
                ("a worker hosting an actor", handler)
            )
    for kind in dp.allowed_kinds(Role.WORKER, Role.HEAD):
        if not any(e.kind == kind for e in hosting) and kind != F.KIND_HELLO:
            out.setdefault((kind, Role.WORKER, Role.HEAD), []).append(
                ("a worker hosting an actor", head._actors.on_worker_event)
            )
    for sender in (Role.DRIVER, Role.WORKER, Role.OBSERVER):
        out.setdefault((F.KIND_HELLO, sender, Role.HEAD), []).append(("", head._members.hello))
    for kind in (F.KIND_ERROR, F.KIND_STATUS, F.KIND_TIMELINE, F.KIND_LABELS, F.KIND_SNAPSHOT):
        out.setdefault((kind, Role.HEAD, Role.OBSERVER), []).append(("", observer._received))
    out.setdefault((F.KIND_FETCH, Role.FETCHER, Role.OBJECT_SERVER), []).append(
        ("", worker._admit)
    )
    for kind in (F.KIND_RESULT, F.KIND_ERROR, F.KIND_PART, F.KIND_MAPPED):
        out.setdefault((kind, Role.OBJECT_SERVER, Role.FETCHER), []).append(
            ("a driver's or a worker's", driver._fetcher.receive)
        )
    return out


#: Links whose frames the receiving core reads and drops on purpose, and why. (A test checks
#: that no route takes them: an entry here cannot hide a handler.)
DROPPED: Final = {
    (F.KIND_ERROR, Role.HEAD, Role.WORKER): (
        "dropped: the head says why, then closes the link or drops the answer"
    ),
}


def role_name(role: Role) -> str:
    return role.name.lower().replace("_", " ")


def method(handler: Handler) -> str:
    owner = type(handler.__self__).__name__
    return f"`{owner}.{handler.__name__}`"


def module(handler: Handler) -> str:
    path = Path(inspect.getfile(handler.__func__)).resolve()
    return f"`{path.relative_to(ROOT).as_posix()}`"


def rows() -> list[list[str]]:
    """One row per link of every kind: kind, name, link, method, module."""
    found = handlers()
    out = []
    for kind in KINDS:
        for sender, receiver, _ in kind.sent:
            link = f"{role_name(sender)} → {role_name(receiver)}"
            key = (kind.number, sender, receiver)
            if key in DROPPED:
                where = f"`dista_proto/_{role_name(receiver)}.py`"
                out.append([str(kind.number), kind.name, link, f"none ({DROPPED[key]})", where])
            for when, handler in found.get(key, []):
                what = method(handler) + (f" ({when})" if when else "")
                out.append([str(kind.number), kind.name, link, what, module(handler)])
    return out


def unhandled() -> list[str]:
    """Links of the kinds table that no core's route takes."""
    found = handlers()
    return [
        f"{kind.name}: {role_name(s)} → {role_name(r)}"
        for kind in KINDS
        for s, r, _ in kind.sent
        if not found.get((kind.number, s, r)) and (kind.number, s, r) not in DROPPED
    ]


def render() -> str:
    headers = ["Kind", "Name", "Link", "Handled by", "In"]
    cells = rows()
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]

    def line(values: list[str]) -> str:
        padded = (
            v.rjust(w) if i == 0 else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    rule = (
        "| "
        + " | ".join("-" * (w - 1) + ":" if i == 0 else "-" * w for i, w in enumerate(widths))
        + " |"
    )
    return "\n".join([BEGIN, "", line(headers), rule, *(line(row) for row in cells), "", END])


def rendered_part(page: str) -> str:
    """What the page holds between the markers (and the markers), or "" if it has none."""
    return rendered.part(page, BEGIN, END)


def main(argv: list[str]) -> int:
    return rendered.main(argv, PAGE, render, BEGIN, END)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
