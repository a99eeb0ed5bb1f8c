"""The states of a connection's two sides, what moves them, and why a frame may not pass.

Theory of operation
-------------------
Each side of a `Connection` (ours, sending; theirs, receiving) has a `ConnectionState`. The
head's side of a link starts in AWAIT_HELLO both ways. A peer's side starts with our
direction in AWAIT_HELLO and, for drivers and clients, theirs in AWAIT_WELCOME; workers and
observers get no welcome, so theirs starts OPEN. Object-server links carry no hello and
start OPEN both ways. Hello and welcome are the only frames that move a state (`start`,
`after_hello`, `after_welcome`, `sent_hello`, `sent_welcome`); an error moves theirs to
ERROR and, on the head, ours to CLOSED.

What their side may send is a list of limits indexed by kind byte (`_kinds.body_limits`):
the largest body a header may announce for that kind now, 0 for a kind that may not come.
Before a peer's hello the head takes only a hello, of at most 42 bytes; after it, what the
peer's role may send, each kind up to what it can hold. What our side may send is a set of
kinds, checked before anything is queued.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

from . import frame as F
from ._errors import LocalProtocolError, RemoteProtocolError
from ._kinds import allowed_kinds, body_limits
from ._roles import Role, receives_welcome

__all__ = [
    "ConnectionState",
    "after_hello",
    "after_welcome",
    "receive_refusal",
    "send_refusal",
    "sent_hello",
    "sent_welcome",
    "start",
]


class ConnectionState(enum.Enum):
    AWAIT_HELLO = "await-hello"
    AWAIT_WELCOME = "await-welcome"
    OPEN = "open"
    CLOSED = "closed"
    ERROR = "error"


_PEER_ROLES: Final = frozenset({Role.DRIVER, Role.WORKER, Role.CLIENT, Role.OBSERVER})
_HELLO_ONLY: Final = frozenset({F.KIND_HELLO})
_WELCOME_OR_ERROR: Final = frozenset({F.KIND_WELCOME, F.KIND_ERROR})
_U32: Final = struct.Struct("<I")


def start(
    our_role: Role,
) -> tuple[Role | None, ConnectionState, ConnectionState, list[int], frozenset[int]]:
    """Where a connection for ``our_role`` starts: (their role, our state, their state,
    the limits of what they may send, the kinds we may send)."""
    if our_role == Role.HEAD:
        # "the first frame must be hello", and a hello is tiny: take nothing else first.
        limits = body_limits(Role.DRIVER, Role.HEAD, _HELLO_ONLY)
        return None, ConnectionState.AWAIT_HELLO, ConnectionState.AWAIT_HELLO, limits, frozenset()
    if our_role in _PEER_ROLES:
        if receives_welcome(our_role):
            limits = body_limits(Role.HEAD, our_role, _WELCOME_OR_ERROR)
            theirs = ConnectionState.AWAIT_WELCOME
        else:
            limits = body_limits(Role.HEAD, our_role)
            theirs = ConnectionState.OPEN
        return Role.HEAD, ConnectionState.AWAIT_HELLO, theirs, limits, _HELLO_ONLY
    if our_role in (Role.OBJECT_SERVER, Role.FETCHER):
        other = Role.FETCHER if our_role == Role.OBJECT_SERVER else Role.OBJECT_SERVER
        limits = body_limits(other, our_role)
        open_ = ConnectionState.OPEN
        return other, open_, open_, limits, allowed_kinds(our_role, other)
    raise LocalProtocolError(f"no connection for role {our_role!r}")  # pragma: no cover


def after_hello(role: Role) -> tuple[ConnectionState, frozenset[int], list[int]]:
    """The head received a hello from ``role``: (our state, the kinds we may send, the
    limits of what they may send now)."""
    limits = body_limits(role, Role.HEAD, allowed_kinds(role, Role.HEAD) - _HELLO_ONLY)
    if receives_welcome(role):
        return ConnectionState.AWAIT_WELCOME, _WELCOME_OR_ERROR, limits
    return ConnectionState.OPEN, allowed_kinds(Role.HEAD, role), limits


def after_welcome(our_role: Role) -> list[int]:
    """A driver or client received its welcome: the limits of what the head may send now."""
    kinds = allowed_kinds(Role.HEAD, our_role) - {F.KIND_WELCOME}
    return body_limits(Role.HEAD, our_role, kinds)


def sent_hello(our_role: Role) -> frozenset[int]:
    """What a peer may send once its hello is queued."""
    return allowed_kinds(our_role, Role.HEAD) - _HELLO_ONLY


def sent_welcome(their_role: Role) -> frozenset[int]:
    """What the head may send a driver or client once its welcome is queued."""
    return allowed_kinds(Role.HEAD, their_role) - {F.KIND_WELCOME}


def receive_refusal(
    kind: int,
    length: int,
    limit: int,
    part_asked: int,
    their_state: ConnectionState,
    their_role: Role | None,
    our_role: Role,
) -> RemoteProtocolError:
    """Why a header announcing ``length`` bytes of ``kind`` may not pass, where the limit
    for ``kind`` is ``limit`` (0: it may not come at all)."""
    if length < F.HEADER or length > F.MAX_FRAME:
        try:
            F.frame_length(_U32.pack(length))  # says which bound
        except RemoteProtocolError as e:
            return e
    name = F.kind_name(kind)
    if kind not in F.KIND_NAMES:
        return RemoteProtocolError(f"unknown frame kind {kind}", kind=kind, field="kind")
    if limit:
        asked = ""
        if kind == F.KIND_PART and part_asked:
            asked = f" (parts of at most {part_asked} bytes were asked for)"
        return RemoteProtocolError(
            f"{name}: the header announces a body of {length} bytes, over the limit of "
            f"{limit} for a {name}{asked}",
            kind=kind,
            field="length",
        )
    if their_state == ConnectionState.AWAIT_HELLO:
        return RemoteProtocolError(f"the first frame must be hello, not {name}", kind=kind)
    if their_state == ConnectionState.AWAIT_WELCOME:
        return RemoteProtocolError(
            f"the head must answer hello with welcome, not {name}", kind=kind
        )
    sender = their_role.name.lower() if their_role else "peer"
    receiver = our_role.name.lower().replace("_", " ")
    return RemoteProtocolError(f"a {sender} may not send {name} to a {receiver}", kind=kind)


def send_refusal(
    kind: int, our_state: ConnectionState, our_role: Role, their_role: Role | None
) -> LocalProtocolError:
    """Why we may not send ``kind`` now."""
    name = F.kind_name(kind)
    if our_state in (ConnectionState.CLOSED, ConnectionState.ERROR):
        why = f"cannot send {name}: the connection is {our_state.value}"
    elif our_state == ConnectionState.AWAIT_HELLO and our_role == Role.HEAD:
        why = f"cannot send {name} before the peer's hello"
    elif our_state == ConnectionState.AWAIT_HELLO:
        why = f"the first frame must be hello, not {name}"
    elif our_state == ConnectionState.AWAIT_WELCOME:
        why = f"the head answers a hello with welcome (or error), not {name}"
    else:
        receiver = their_role.name.lower().replace("_", " ") if their_role else ""
        why = f"a {our_role.name.lower().replace('_', ' ')} may not send {name} to a {receiver}"
    return LocalProtocolError(why, kind=kind)
