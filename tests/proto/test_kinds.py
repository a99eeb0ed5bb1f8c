"""The kinds table (dista_proto/_kinds.py): what the codecs, the connection's rules,
frame.KIND_NAMES and docs/wire.md know about each kind comes from its rows.

The snapshot below was taken from the hand-written tables (frame.KIND_NAMES, the codecs'
dicts, _roles' per-direction sets and payload sizes) before they were derived from the rows:
deriving them must not change a single number. The rest checks every lookup against the
rows themselves, the page's table against its rendering, and that every row's event
survives its own codec.
"""

from __future__ import annotations

from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings

from dista_proto import Event, Role, allowed_kinds, decode_event, encode_event, frame
from dista_proto._kinds import (
    DECODERS,
    ENCODERS,
    KINDS,
    SENT_BY,
    Kind,
    body_limits,
    by_number,
    received_by,
)

from .support.kinds_table import PAGE, render, rendered_part
from .test_frame import PAGE_KIND_NAMES
from .test_roundtrip import strategy

D, W, C, O, H = Role.DRIVER, Role.WORKER, Role.CLIENT, Role.OBSERVER, Role.HEAD
S, F = Role.OBJECT_SERVER, Role.FETCHER

ANY: Final = frame.MAX_FRAME  # the largest body of a kind that carries a value or a text

# -- the snapshot ------------------------------------------------------------------------------

OLD_NAMES: Final = PAGE_KIND_NAMES  # the page's table, as tests/proto/test_frame.py holds it
OLD_KINDS: Final = dict(enumerate(OLD_NAMES, 1))
#: Dista's own kinds past the page's 33 (only our peers send them): docs/wire.md, "Extensions".
OUR_KINDS: Final = {
    34: "actor-open",
    36: "actor-name",
    37: "actor-lookup",
    38: "actor-build",
    39: "actor-order",
    40: "mapped",
    41: "task-names",
    42: "labels",
    43: "vitals",
    44: "snapshot",
}
OLD_EVENTS: Final = {
    "Task": 1, "Result": 2, "Error": 3, "Hello": 4, "Welcome": 5, "TaskAfter": 6, "Stored": 7,
    "Located": 8, "Fetch": 9, "TaskInputs": 10, "Release": 11, "Free": 12, "Stats": 13,
    "Holding": 14, "Claim": 15, "Resumed": 16, "Span": 17, "Timeline": 18, "ActorCreate": 19,
    "ActorCall": 20, "ActorKill": 21, "Checkpoint": 22, "Checkpointed": 23, "ActorRestore": 24,
    "Covered": 25, "Status": 26, "Stop": 27, "TaskMany": 28, "Drain": 29, "Adopt": 30,
    "Adopted": 31, "Cancel": 32, "Part": 33, "ActorOpen": 34, "ActorName": 36,
    "ActorLookup": 37, "ActorBuild": 38, "ActorOrder": 39, "Mapped": 40,
    "TaskNames": 41, "Labels": 42, "Vitals": 43, "Snapshot": 44,
}  # fmt: skip
#: A labels frame's largest body: the header, a count, and every entry at its longest.
_LABELS: Final = 17 + 4 + frame.MAX_LABELS * (10 + frame.MAX_LABEL)
#: (sender, receiver): {kind: largest body} for every kind the sender may send.
OLD_LIMITS: Final = {
    (D, H): {1: ANY, 2: ANY, 3: ANY, 4: 58, 6: ANY, 11: 17, 13: 17, 15: 17, 16: 17, 18: 17,
             19: ANY, 20: ANY, 21: 17, 22: 25, 28: ANY, 32: 17, 34: 33,
             36: 17 + 255, 37: 17 + 255, 39: ANY, 41: 17 + 8 * frame.MAX_TASK_NAMES,
             42: _LABELS, 43: 57},
    (W, H): {2: ANY, 3: ANY, 4: 58, 7: 25, 14: ANY, 17: 41, 23: ANY, 29: 17, 31: ANY,
             41: 17 + 8 * frame.MAX_TASK_NAMES, 43: 57},
    (O, H): {4: 58, 18: 17, 26: 17, 27: 17, 42: _LABELS, 44: 17},
    (H, D): {2: ANY, 3: ANY, 5: 49, 8: 45, 13: 57, 18: ANY, 25: 25},
    (H, W): {1: ANY, 3: ANY, 8: 45, 10: ANY, 12: 17, 19: ANY, 20: ANY, 21: 17, 22: 25, 24: 25,
             27: 17, 28: ANY, 30: 29, 38: 25},
    (H, O): {3: ANY, 18: ANY, 26: ANY, 42: _LABELS, 44: ANY},
    (S, F): {2: ANY, 3: ANY, 33: 17 + 16 + frame.PART_SIZE, 40: 17 + 8 + 16},
    (F, S): {9: 41},
}  # fmt: skip
OLD_LIMITS[C, H] = OLD_LIMITS[D, H]  # a client is a driver inside a worker
OLD_LIMITS[H, C] = OLD_LIMITS[H, D]
_P: Final = frame.MAX_PAYLOAD
#: The largest payload of every kind, whatever the link: to the head (or between a fetcher
#: and an object server), and from the head.
OLD_PAYLOADS: Final = {
    False: {1: _P, 2: _P, 3: _P, 4: 41, 5: 32, 6: _P, 7: 8, 8: 28, 9: 24, 10: _P, 11: 0, 12: 0,
            13: 0, 14: _P, 15: 0, 16: 0, 17: 24, 18: 0, 19: _P, 20: _P, 21: 0, 22: 8, 23: _P,
            24: 8, 25: 8, 26: 0, 27: 0, 28: _P, 29: 0, 30: 12, 31: _P, 32: 0,
            33: 16 + frame.PART_SIZE},
    True: {1: _P, 2: _P, 3: _P, 4: 41, 5: 32, 6: _P, 7: 8, 8: 28, 9: 24, 10: _P, 11: 0, 12: 0,
           13: 40, 14: _P, 15: 0, 16: 0, 17: 24, 18: _P, 19: _P, 20: _P, 21: 0, 22: 8, 23: _P,
           24: 8, 25: 8, 26: _P, 27: 0, 28: _P, 29: 0, 30: 12, 31: _P, 32: 0,
           33: 16 + frame.PART_SIZE},
}  # fmt: skip
ALL_PAIRS: Final = [(s, r) for s in Role for r in Role]


def test_kind_numbers_and_names_are_unchanged() -> None:
    assert frame.KIND_NAMES == {**OLD_KINDS, **OUR_KINDS}
    for number, name in {**OLD_KINDS, **OUR_KINDS}.items():
        assert getattr(frame, "KIND_" + name.upper().replace("-", "_")) == number
        assert frame.kind_name(number) == name
    assert frame.kind_name(35) == "kind 35"


def test_the_codecs_dispatch_the_same_kinds() -> None:
    assert {cls.__name__: cls.kind for cls in ENCODERS} == OLD_EVENTS
    assert sorted(DECODERS) == sorted({**OLD_KINDS, **OUR_KINDS})


@pytest.mark.parametrize(
    ("sender", "receiver"), ALL_PAIRS, ids=[f"{s.name}-{r.name}" for s, r in ALL_PAIRS]
)
def test_who_may_send_what_and_how_large_is_unchanged(sender: Role, receiver: Role) -> None:
    old = OLD_LIMITS.get((sender, receiver), {})
    assert allowed_kinds(sender, receiver) == frozenset(old)
    limits = body_limits(sender, receiver)
    assert len(limits) == 256
    assert {k: v for k, v in enumerate(limits) if v} == old
    # A narrower set of kinds (as before a hello or a welcome) keeps each kind's limit.
    from_head = sender == Role.HEAD
    everything = body_limits(sender, receiver, frozenset(OLD_KINDS))
    assert {k: v for k, v in enumerate(everything) if v} == {
        k: frame.HEADER + p for k, p in OLD_PAYLOADS[from_head].items()
    }


# -- the table against what is derived from it -------------------------------------------------

ROWS: Final = [pytest.param(kind, id=kind.name) for kind in KINDS]


def _travels(kind: Kind, sender: Role, receiver: Role) -> bool:
    as_driver = {C: D}
    pair = (as_driver.get(sender, sender), as_driver.get(receiver, receiver))
    return any((link.sender, link.receiver) == pair for link in kind.sent)


def test_every_row_is_one_kind() -> None:
    for column in ("number", "name", "event"):
        values = [getattr(kind, column) for kind in KINDS]
        assert len(set(values)) == len(values), f"two rows share a {column}"
    assert [kind.number for kind in KINDS] == sorted(kind.number for kind in KINDS)


@pytest.mark.parametrize("kind", ROWS)
def test_the_row_agrees_with_frame_and_its_event(kind: Kind) -> None:
    constant = "KIND_" + kind.name.upper().replace("-", "_")
    assert getattr(frame, constant) == kind.number
    assert constant in frame.__all__
    assert frame.KIND_NAMES[kind.number] == kind.name
    assert kind.event.kind == kind.number
    assert kind.event.__name__ in __import__("dista_proto").__all__
    assert by_number(kind.number) is kind
    assert kind.sent, "a kind no one may send"
    assert all(why for _, _, why in kind.sent)
    assert 0 <= kind.payload <= frame.MAX_PAYLOAD
    assert kind.reply is None or 0 <= kind.reply <= frame.MAX_PAYLOAD


def test_the_codecs_and_names_are_the_rows() -> None:
    assert {kind.event: kind.encode for kind in KINDS} == ENCODERS
    assert {kind.number: kind.decode for kind in KINDS} == DECODERS
    assert {kind.number: kind.name for kind in KINDS} == frame.KIND_NAMES


@pytest.mark.parametrize(
    ("sender", "receiver"), ALL_PAIRS, ids=[f"{s.name}-{r.name}" for s, r in ALL_PAIRS]
)
def test_who_may_send_what_is_the_rows(sender: Role, receiver: Role) -> None:
    rows = [kind for kind in KINDS if _travels(kind, sender, receiver)]
    assert allowed_kinds(sender, receiver) == frozenset(kind.number for kind in rows)
    limits = body_limits(sender, receiver)
    expected = {kind.number: frame.HEADER + kind.largest(sender == H) for kind in rows}
    assert {k: v for k, v in enumerate(limits) if v} == expected


@pytest.mark.parametrize("role", list(Role), ids=[r.name for r in Role])
def test_which_core_handles_a_kind_is_the_receiving_end_of_its_links(role: Role) -> None:
    as_driver = D if role == C else role
    handled = {kind.number for kind in KINDS if as_driver in kind.receivers}
    assert received_by(role) == handled
    assert received_by(role) == {k for s in Role for k in allowed_kinds(s, role)}


def test_which_core_handles_a_kind_spot_checks() -> None:
    assert by_number(frame.KIND_HELLO).receivers == {H}
    assert by_number(frame.KIND_ERROR).receivers == {H, D, W, O, F}
    assert by_number(frame.KIND_FETCH).receivers == {S}
    assert frame.KIND_WELCOME not in received_by(H)
    assert frame.KIND_PART in received_by(F)


def test_links_beyond_the_page_say_why() -> None:
    beyond = {(k.name, s, r) for k in KINDS for s, r, why in k.sent if why != SENT_BY}
    # docs/wire.md, "Kinds at a glance", and tests/proto/test_connection.py's hand table.
    assert beyond == {
        ("result", D, H), ("error", D, H),  # a resuming driver
        ("result", S, F), ("error", S, F),  # an empty fetch
        ("error", H, W), ("error", H, O),  # the head says why it drops anyone
        ("located", H, W),  # a fetch grant
        ("timeline", O, H), ("timeline", H, O),  # an observer's timeline
        ("actor-open", D, H),  # Dista's kind: an actor's capability, from a handle
        ("actor-name", D, H), ("actor-lookup", D, H),  # Dista's kinds: named actors
        ("actor-build", H, W),  # Dista's kind: a build's number, for the checkpoint fences
        ("actor-order", D, H),  # Dista's kind: where a resuming driver's kept calls ran
        ("mapped", S, F),  # Dista's kind: an object sent to a fetcher's mailbox
        ("task-names", D, H), ("task-names", W, H),  # Dista's kind: the tasks a peer has
        ("labels", D, H), ("labels", O, H), ("labels", H, O),  # Dista's kinds for people:
        ("vitals", D, H), ("vitals", W, H),  # what IDs are called, pid and memory,
        ("snapshot", O, H), ("snapshot", H, O),  # a dashboard's snapshot
    }  # fmt: skip


def test_the_wire_page_holds_the_rendered_table() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert rendered_part(page) == render(), (
        "docs/wire.md's kinds table differs from dista_proto/_kinds.py: "
        "run `python -m tests.proto.support.kinds_table --write`"
    )
    assert "Adding a kind is one row there" in page


def test_the_rendered_table_names_every_row_and_link() -> None:
    lines = render().splitlines()
    for kind in KINDS:
        (line,) = [x for x in lines if x.startswith(f"| {kind.number:>4} | {kind.name} ")]
        for sender, receiver, _ in kind.sent:
            assert sender.name.lower().replace("_", " ") in line
            assert receiver.name.lower().replace("_", " ") in line


# -- every row's event through its own codec ---------------------------------------------------

DIRECTIONS: Final = [
    pytest.param(kind, from_head, id=f"{kind.name}-{'from' if from_head else 'to'}-head")
    for kind in KINDS
    for from_head in sorted({link.sender == H for link in kind.sent})
]


@pytest.mark.parametrize(("kind", "from_head"), DIRECTIONS)
def test_every_row_round_trips(kind: Kind, from_head: bool) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(strategy(kind.number, from_head))
    def check(event: Event) -> None:
        assert type(event) is kind.event
        number, object_id, task_id, prefix, tail = kind.encode(event, from_head)
        assert number == kind.number
        payload = prefix if tail is None else prefix + bytes(frame.flat(tail))
        assert len(payload) <= kind.largest(from_head)
        assert kind.decode(object_id, task_id, payload, from_head) == event
        # ... and the dispatch picks this row's codec.
        assert decode_event(encode_event(event, from_head=from_head), from_head=from_head) == event

    check()
