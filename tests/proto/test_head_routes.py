"""docs/protocol.md's "Where the head handles each kind" is the head's route tables: every
kind a head takes from each role is in it, and nothing else; and every kind a role may
send a head (the connection's who-may-send rules) is routed or deliberately ignored."""

from __future__ import annotations

import re
from pathlib import Path

import dista_proto as dp
from dista_proto import frame as F

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
#: Kinds a role may send that the head takes only in one state: a worker's checkpointed
#: comes from an actor's worker (`Actors.on_worker_event`), never from the task routes.
_ACTOR_ONLY = {"checkpointed"}


def _documented() -> dict[str, set[str]]:
    text = DOCS.read_text()
    section = text.split("### Where the head handles each kind", 1)[1].split("\n### ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("from", "---"):
            continue
        for kind in re.split(r",\s*", cells[1]):
            rows.setdefault(cells[0], set()).add(kind)
    return rows


def _routed() -> dict[str, set[str]]:
    head = dp.Head(epoch=1, first_number=1)

    def names(table: dict[type[dp.Event], object]) -> set[str]:
        return {F.kind_name(kind.kind) for kind in table}

    return {
        "driver": names(head._driver_routes),
        "worker": names(head._worker_routes) | _ACTOR_ONLY,
        "observer": names(head._observer_routes),
    }


def test_the_docs_name_every_route_and_no_other() -> None:
    assert _documented() == _routed()


def test_every_kind_a_role_may_send_the_head_is_routed() -> None:
    """A kind the connection lets through from a role, but no route takes, would be
    dropped without a word (a driver's gets "not supported" instead)."""
    routed = _routed()
    for name, role in (
        ("driver", dp.Role.DRIVER),
        ("worker", dp.Role.WORKER),
        ("observer", dp.Role.OBSERVER),
    ):
        allowed = {F.kind_name(k) for k in dp.allowed_kinds(role, dp.Role.HEAD)} - {"hello"}
        assert allowed == routed[name], name
