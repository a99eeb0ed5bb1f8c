"""Who may send which kind to whom, and how large: the protocol page's "sent by" column and
its payloads as tables.

A connection joins two roles. Head links join the head and a peer that said hello (driver,
worker, client or observer). Object-server links join a fetcher (a driver or a worker
fetching an object) and a worker's object server; they carry no hello.

Every kind a receiver takes has a largest body (kind, IDs and payload: the length a frame's
prefix announces). Kinds whose payload the page fixes have that size (a hello at most
`HELLO_PAYLOAD` bytes, a release none, a span 24 bytes ...); kinds that carry a value or a
text take up to `MAX_FRAME`. `body_limits` lays these out as one list indexed by the kind
byte, 0 for a kind that may not come, so a connection checks a header with one lookup.
"""

from __future__ import annotations

import enum
from typing import Final

from . import frame as F

__all__ = [
    "HELLO_PAYLOAD",
    "Role",
    "allowed_kinds",
    "body_limits",
    "part_limit",
    "receives_welcome",
]


class Role(enum.IntEnum):
    """The end of a connection. The four peer roles have their hello byte as value."""

    DRIVER = F.ROLE_DRIVER
    WORKER = F.ROLE_WORKER
    CLIENT = F.ROLE_CLIENT
    OBSERVER = F.ROLE_OBSERVER
    HEAD = 16
    #: A worker's object server, answering fetches.
    OBJECT_SERVER = 17
    #: A driver or worker connected to an object server to fetch from it.
    FETCHER = 18


_DRIVER_TO_HEAD: Final = frozenset(
    {
        F.KIND_HELLO,
        F.KIND_TASK,
        # "a small result or error back as a result or error frame" when resuming
        F.KIND_RESULT,
        F.KIND_ERROR,
        F.KIND_TASK_AFTER,
        F.KIND_RELEASE,
        F.KIND_STATS,
        F.KIND_CLAIM,
        F.KIND_RESUMED,
        F.KIND_TIMELINE,
        F.KIND_ACTOR_CREATE,
        F.KIND_ACTOR_CALL,
        F.KIND_ACTOR_KILL,
        F.KIND_CHECKPOINT,
        F.KIND_TASK_MANY,
        F.KIND_CANCEL,
    }
)
_HEAD_TO_DRIVER: Final = frozenset(
    {
        F.KIND_RESULT,
        F.KIND_ERROR,
        F.KIND_WELCOME,
        F.KIND_LOCATED,
        F.KIND_STATS,
        F.KIND_TIMELINE,
        F.KIND_COVERED,
    }
)
_WORKER_TO_HEAD: Final = frozenset(
    {
        F.KIND_HELLO,
        F.KIND_RESULT,
        F.KIND_ERROR,
        F.KIND_STORED,
        F.KIND_HOLDING,
        F.KIND_SPAN,
        F.KIND_CHECKPOINTED,
        F.KIND_DRAIN,
        F.KIND_ADOPTED,
    }
)
_HEAD_TO_WORKER: Final = frozenset(
    {
        F.KIND_TASK,
        F.KIND_TASK_INPUTS,
        F.KIND_FREE,
        F.KIND_ACTOR_CREATE,
        F.KIND_ACTOR_CALL,
        F.KIND_ACTOR_KILL,
        F.KIND_CHECKPOINT,
        F.KIND_ACTOR_RESTORE,
        F.KIND_STOP,
        F.KIND_TASK_MANY,
        F.KIND_ADOPT,
        # Our decision: the head may say why it refuses or drops any peer before closing.
        F.KIND_ERROR,
        # Our extension: a grant, "the fetcher at this host may fetch this object"
        # (docs/protocol.md, "Extensions: fetch grants").
        F.KIND_LOCATED,
    }
)
_OBSERVER_TO_HEAD: Final = frozenset({F.KIND_HELLO, F.KIND_STATUS, F.KIND_STOP, F.KIND_TIMELINE})
_HEAD_TO_OBSERVER: Final = frozenset({F.KIND_STATUS, F.KIND_TIMELINE, F.KIND_ERROR})
_FETCHER_TO_SERVER: Final = frozenset({F.KIND_FETCH})
_SERVER_TO_FETCHER: Final = frozenset({F.KIND_RESULT, F.KIND_ERROR, F.KIND_PART})

_TABLE: Final[dict[tuple[Role, Role], frozenset[int]]] = {
    (Role.DRIVER, Role.HEAD): _DRIVER_TO_HEAD,
    (Role.CLIENT, Role.HEAD): _DRIVER_TO_HEAD,
    (Role.HEAD, Role.DRIVER): _HEAD_TO_DRIVER,
    (Role.HEAD, Role.CLIENT): _HEAD_TO_DRIVER,
    (Role.WORKER, Role.HEAD): _WORKER_TO_HEAD,
    (Role.HEAD, Role.WORKER): _HEAD_TO_WORKER,
    (Role.OBSERVER, Role.HEAD): _OBSERVER_TO_HEAD,
    (Role.HEAD, Role.OBSERVER): _HEAD_TO_OBSERVER,
    (Role.FETCHER, Role.OBJECT_SERVER): _FETCHER_TO_SERVER,
    (Role.OBJECT_SERVER, Role.FETCHER): _SERVER_TO_FETCHER,
}


def allowed_kinds(sender: Role, receiver: Role) -> frozenset[int]:
    """The kinds ``sender`` may send to ``receiver`` (empty if they never talk)."""
    return _TABLE.get((sender, receiver), frozenset())


def receives_welcome(role: Role) -> bool:
    """Drivers (and clients, which the head treats as drivers) are numbered by a welcome."""
    return role in (Role.DRIVER, Role.CLIENT)


#: The largest hello payload: the role byte, the registry hash, then a worker's object
#: server address (12 bytes) or a resuming driver's number and epoch (16 bytes): never both.
HELLO_PAYLOAD: Final = 1 + 8 + max(F.ADDR_SIZE, 8 + 8)

#: The largest payload of each kind the page gives a fixed or small layout (a kind not here
#: carries a value, a text or a list: up to MAX_PAYLOAD). A part's is the default before a
#: fetcher has asked for a part size (`part_limit`).
_FIXED_PAYLOAD: Final[dict[int, int]] = {
    F.KIND_HELLO: HELLO_PAYLOAD,
    F.KIND_WELCOME: 16,  # number, epoch
    F.KIND_STORED: 8,  # size
    F.KIND_LOCATED: F.ADDR_SIZE,
    F.KIND_FETCH: 8,  # none, or the largest part
    F.KIND_RELEASE: 0,
    F.KIND_FREE: 0,
    F.KIND_CLAIM: 0,
    F.KIND_RESUMED: 0,
    F.KIND_SPAN: 24,  # arrived, started, ended
    F.KIND_ACTOR_KILL: 0,
    F.KIND_CHECKPOINT: 8,  # the actor's ID, or the calls a restore covers
    F.KIND_ACTOR_RESTORE: 8,
    F.KIND_COVERED: 8,
    F.KIND_STOP: 0,
    F.KIND_DRAIN: 0,
    F.KIND_ADOPT: F.ADDR_SIZE,
    F.KIND_CANCEL: 0,
    F.KIND_PART: F.PART_HEADER + F.PART_SIZE,
}
#: Kinds that are empty requests to the head and replies from it.
_REQUESTS: Final = frozenset({F.KIND_STATS, F.KIND_TIMELINE, F.KIND_STATUS})
_STATS_REPLY: Final = 5 * 8
_LIMITS: dict[tuple[Role, Role, frozenset[int]], tuple[int, ...]] = {}


def _payload_limit(kind: int, from_head: bool) -> int:
    if kind in _REQUESTS:
        if not from_head:
            return 0
        return _STATS_REPLY if kind == F.KIND_STATS else F.MAX_PAYLOAD
    return _FIXED_PAYLOAD.get(kind, F.MAX_PAYLOAD)


def body_limits(sender: Role, receiver: Role, kinds: frozenset[int] | None = None) -> list[int]:
    """The largest body ``receiver`` takes from ``sender``, indexed by kind byte (256 of
    them); 0 for a kind not in ``kinds`` (by default, every kind ``sender`` may send)."""
    if kinds is None:
        kinds = allowed_kinds(sender, receiver)
    key = (sender, receiver, kinds)
    limits = _LIMITS.get(key)
    if limits is None:
        from_head = sender == Role.HEAD
        table = [0] * 256
        for kind in kinds:
            table[kind] = F.HEADER + _payload_limit(kind, from_head)
        limits = _LIMITS[key] = tuple(table)
    return list(limits)


def part_limit(part: int) -> int:
    """The largest part frame body for a fetcher that asked for parts of ``part`` bytes."""
    return F.HEADER + F.PART_HEADER + F.part_payload_size(part)
