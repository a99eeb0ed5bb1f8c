"""The head's security rules: what a certificate's roles allow, the texts of refusals, and
`Guard`, the part of the head that checks what peers name (another driver's objects and
actors, too many results) and what links may do before they say hello.

A binding that authenticates its peers (TLS) gives the head the role words of each peer's
certificate; the head then bounds what the peer may claim in its hello and whether it may
stop the cluster. A link never given roles (plain TCP) is unrestricted. The rules and texts
are in docs/protocol.md, "Security rules".
"""

from __future__ import annotations

from collections.abc import Container
from typing import Final

from ._conventions import ID_BITS, ID_MASK, MAX_RESULTS
from ._events import Error, TaskAfter
from ._head_records import Peer
from ._head_wire import Wire
from ._hello_watch import HelloWatch
from ._roles import Role

__all__ = [
    "CERT_ROLES",
    "Guard",
    "foreign_text",
    "hello_refusal",
    "may_stop",
    "useful_roles",
]

#: The role words a certificate may carry.
CERT_ROLES: Final = frozenset({"head", "worker", "driver", "observer", "stop", "admin"})
#: The certificate roles that allow each hello role; ``admin`` allows everything.
_HELLO_NEEDS: Final[dict[Role, frozenset[str]]] = {
    Role.WORKER: frozenset({"worker", "admin"}),
    Role.DRIVER: frozenset({"driver", "admin"}),
    # A driver inside a worker process uses its worker's certificate; a client runs with
    # its worker's access (to the objects and handles passed into its task), so a driver's
    # certificate may not be one.
    Role.CLIENT: frozenset({"worker", "admin"}),
    # Status and timeline: a driver may look at its cluster.
    Role.OBSERVER: frozenset({"observer", "driver", "admin"}),
}
_STOP_NEEDS: Final = frozenset({"stop", "admin"})
#: Roles that may say some hello at a head; without one of them a link may do nothing there
#: (``stop`` alone cannot say hello, and stop comes only after an observer's hello).
_USEFUL: Final = frozenset().union(*_HELLO_NEEDS.values())


def useful_roles(roles: frozenset[str]) -> bool:
    """Whether a peer with these certificate roles may do anything at a head."""
    return not roles.isdisjoint(_USEFUL)


def _grants(roles: frozenset[str]) -> str:
    known = sorted(roles & CERT_ROLES)
    return ", ".join(known) if known else "no role"


def hello_refusal(roles: frozenset[str] | None, role: Role) -> str | None:
    """Why a peer with ``roles`` may not say hello as ``role``, or None if it may."""
    if roles is None or not roles.isdisjoint(_HELLO_NEEDS[role]):
        return None
    return (
        f"this connection's certificate grants {_grants(roles)}; "
        f"it may not say hello as a{'n' if role == Role.OBSERVER else ''} {role.name.lower()}"
    )


def may_stop(roles: frozenset[str] | None) -> str | None:
    """Why a peer with ``roles`` may not stop the head, or None if it may."""
    if roles is None or not roles.isdisjoint(_STOP_NEEDS):
        return None
    return (
        f"this connection's certificate grants {_grants(roles)}; it may not stop the head "
        "(stop needs a certificate with the stop or admin role)"
    )


def foreign_text(oid: int) -> str:
    """The refusal of another driver's object named by a driver."""
    return f"object {oid:#x} is not this driver's: a driver may only use objects it holds"


class Guard:
    """What the head checks of its peers beyond the protocol; and links before hello."""

    def __init__(
        self,
        wire: Wire,
        *,
        objects: Container[int],
        actors: Container[int],
        hello_deadline_ns: int,
        hello_idle_ns: int,
    ) -> None:
        self._wire = wire
        self._objects = objects
        self._actors = actors
        self.hello_watch = HelloWatch(hello_deadline_ns, hello_idle_ns)

    # -- roles and hello -------------------------------------------------------------------

    def authenticated(
        self, link: int, roles: frozenset[str], identity: bytes = b"", subject: str = ""
    ) -> bool:
        """The peer on ``link`` proved a certificate granting ``roles`` (call before reading
        any byte). False if those roles may do nothing at a head: the head has forgotten the
        link and the binding closes it. Otherwise its hello and stop are bounded by them,
        and a driver's secret by ``identity`` (the certificate's SHA-256; ``subject`` names
        it in the head's log)."""
        wire = self._wire
        peer = wire.peers.get(link)
        if peer is None:
            return False
        if not useful_roles(roles):
            wire.peers.pop(link)
            self.hello_watch.done(link)
            wire.links.forget(link)
            return False
        peer.roles = roles
        peer.identity = identity
        peer.subject = subject
        return True

    def greeted(self, link: int) -> bool:
        """Whether ``link`` has said hello; a link the head does not know counts as greeted,
        so a binding evicting the oldest un-greeted connection never picks a gone one."""
        peer = self._wire.peers.get(link)
        return peer is None or peer.role is not None

    def no_hello(self, link: int, why: str) -> None:
        """``link`` waited out its hello deadline or idle time (`HelloWatch`)."""
        if self._wire.peers.pop(link, None) is not None:
            self._wire.close(link, why)

    # -- isolation -------------------------------------------------------------------------

    def foreign(self, peer: Peer, oid: int) -> bool:
        """Whether ``oid`` is another driver's (its number is not ``peer``'s): if so, say so.
        Refs cannot travel inside values, so the objects a driver holds are its own."""
        if not oid or oid >> ID_BITS == peer.number:
            return False
        self._wire.links.send(peer.link, Error(oid, foreign_text(oid)))
        return True

    def foreign_input(self, peer: Peer, event: TaskAfter, results: int) -> bool:
        """Whether ``event`` names another driver's object as input: if so, it is not queued;
        the object is named, and so are the task's own results, so its refs fail readably."""
        number = peer.number
        for input_id in event.inputs:
            if input_id and input_id >> ID_BITS != number:
                self.foreign(peer, input_id)
                oid = event.object_id
                if oid >> ID_BITS == number and (oid & ID_MASK) + results - 1 <= ID_MASK:
                    why = foreign_text(input_id)
                    for i in range(oid, oid + min(results, 1 << 16)):
                        if i not in self._objects and i not in self._actors:
                            self._wire.links.send(peer.link, Error(i, why))
                return True
        return False

    def too_many(self, peer: Peer, oid: int, results: int) -> bool:
        """Whether a task of ``results`` results is past `MAX_RESULTS`: if so, say so."""
        if results <= MAX_RESULTS:
            return False
        why = f"a task has at most {MAX_RESULTS} results, not {results}"
        self._wire.links.send(peer.link, Error(oid, why))
        return True
