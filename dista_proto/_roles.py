"""Who may send which kind to whom: the protocol page's "sent by" column as a table.

A connection joins two roles. Head links join the head and a peer that said hello (driver,
worker, client or observer). Object-server links join a fetcher (a driver or a worker
fetching an object) and a worker's object server; they carry no hello.
"""

from __future__ import annotations

import enum
from typing import Final

from . import frame as F

__all__ = ["Role", "allowed_kinds", "receives_welcome"]


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
