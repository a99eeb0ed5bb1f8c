"""The frame kinds: what the connection and the codecs know about each kind.

The snapshot below was taken from the hand-written tables (frame.KIND_NAMES, the codecs'
dicts, _roles' per-direction sets and payload sizes) before they were derived from one table:
deriving them must not change a single number.
"""

from __future__ import annotations

from typing import Final

import pytest

from dista_proto import Role, allowed_kinds, frame
from dista_proto._decode import DECODERS
from dista_proto._encode import ENCODERS
from dista_proto._roles import body_limits

D, W, C, O, H = Role.DRIVER, Role.WORKER, Role.CLIENT, Role.OBSERVER, Role.HEAD
S, F = Role.OBJECT_SERVER, Role.FETCHER
ANY: Final = frame.MAX_FRAME  # the largest body of a kind that carries a value or a text

# -- the snapshot ------------------------------------------------------------------------------

OLD_NAMES: Final = (
    "task result error hello welcome task-after stored located fetch task-inputs release free "
    "stats holding claim resumed span timeline actor-create actor-call actor-kill checkpoint "
    "checkpointed actor-restore covered status stop task-many drain adopt adopted cancel part"
).split()
OLD_KINDS: Final = dict(enumerate(OLD_NAMES, 1))
OLD_EVENTS: Final = {
    "Task": 1, "Result": 2, "Error": 3, "Hello": 4, "Welcome": 5, "TaskAfter": 6, "Stored": 7,
    "Located": 8, "Fetch": 9, "TaskInputs": 10, "Release": 11, "Free": 12, "Stats": 13,
    "Holding": 14, "Claim": 15, "Resumed": 16, "Span": 17, "Timeline": 18, "ActorCreate": 19,
    "ActorCall": 20, "ActorKill": 21, "Checkpoint": 22, "Checkpointed": 23, "ActorRestore": 24,
    "Covered": 25, "Status": 26, "Stop": 27, "TaskMany": 28, "Drain": 29, "Adopt": 30,
    "Adopted": 31, "Cancel": 32, "Part": 33,
}  # fmt: skip
#: (sender, receiver): {kind: largest body} for every kind the sender may send.
OLD_LIMITS: Final = {
    (D, H): {1: ANY, 2: ANY, 3: ANY, 4: 42, 6: ANY, 11: 17, 13: 17, 15: 17, 16: 17, 18: 17,
             19: ANY, 20: ANY, 21: 17, 22: 25, 28: ANY, 32: 17},
    (W, H): {2: ANY, 3: ANY, 4: 42, 7: 25, 14: ANY, 17: 41, 23: ANY, 29: 17, 31: ANY},
    (O, H): {4: 42, 18: 17, 26: 17, 27: 17},
    (H, D): {2: ANY, 3: ANY, 5: 33, 8: 29, 13: 57, 18: ANY, 25: 25},
    (H, W): {1: ANY, 3: ANY, 8: 29, 10: ANY, 12: 17, 19: ANY, 20: ANY, 21: 17, 22: 25, 24: 25,
             27: 17, 28: ANY, 30: 29},
    (H, O): {3: ANY, 18: ANY, 26: ANY},
    (S, F): {2: ANY, 3: ANY, 33: 17 + 16 + frame.PART_SIZE},
    (F, S): {9: 25},
}  # fmt: skip
OLD_LIMITS[C, H] = OLD_LIMITS[D, H]  # a client is a driver inside a worker
OLD_LIMITS[H, C] = OLD_LIMITS[H, D]
_P: Final = frame.MAX_PAYLOAD
#: The largest payload of every kind, whatever the link: to the head (or between a fetcher
#: and an object server), and from the head.
OLD_PAYLOADS: Final = {
    False: {1: _P, 2: _P, 3: _P, 4: 25, 5: 16, 6: _P, 7: 8, 8: 12, 9: 8, 10: _P, 11: 0, 12: 0,
            13: 0, 14: _P, 15: 0, 16: 0, 17: 24, 18: 0, 19: _P, 20: _P, 21: 0, 22: 8, 23: _P,
            24: 8, 25: 8, 26: 0, 27: 0, 28: _P, 29: 0, 30: 12, 31: _P, 32: 0,
            33: 16 + frame.PART_SIZE},
    True: {1: _P, 2: _P, 3: _P, 4: 25, 5: 16, 6: _P, 7: 8, 8: 12, 9: 8, 10: _P, 11: 0, 12: 0,
           13: 40, 14: _P, 15: 0, 16: 0, 17: 24, 18: _P, 19: _P, 20: _P, 21: 0, 22: 8, 23: _P,
           24: 8, 25: 8, 26: _P, 27: 0, 28: _P, 29: 0, 30: 12, 31: _P, 32: 0,
           33: 16 + frame.PART_SIZE},
}  # fmt: skip
ALL_PAIRS: Final = [(s, r) for s in Role for r in Role]


def test_kind_numbers_and_names_are_unchanged() -> None:
    assert frame.KIND_NAMES == OLD_KINDS
    for number, name in OLD_KINDS.items():
        assert getattr(frame, "KIND_" + name.upper().replace("-", "_")) == number
        assert frame.kind_name(number) == name
    assert frame.kind_name(34) == "kind 34"


def test_the_codecs_dispatch_the_same_kinds() -> None:
    assert {cls.__name__: cls.kind for cls in ENCODERS} == OLD_EVENTS
    assert sorted(DECODERS) == sorted(OLD_KINDS)


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
