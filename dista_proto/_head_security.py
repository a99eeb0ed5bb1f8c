"""The head's security rules: what a certificate's roles allow, the texts of refusals, the
watch on links that have not said hello, and `Guard`, the half of `Head` that checks what
peers name (another driver's objects, tasks a worker was not given, the inline cap).

A binding that authenticates its peers (TLS) gives the head the role words of each peer's
certificate; the head then bounds what the peer may claim in its hello and whether it may
stop the cluster. A link never given roles (plain TCP) is unrestricted. The rules and texts
are in docs/protocol.md, "Security rules".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from ._conventions import FREE_STORE, ID_BITS, ID_MASK, MAX_RESULTS
from ._events import Error, Free, TaskAfter
from ._head_records import Peer, TrackedObject
from ._head_recovery import Recovery
from ._roles import Role

__all__ = [
    "CERT_ROLES",
    "Guard",
    "HelloWatch",
    "foreign_text",
    "not_given_text",
    "hello_refusal",
    "inline_cap_text",
    "may_stop",
    "useful_roles",
]

#: The role words a certificate may carry.
CERT_ROLES: Final = frozenset({"head", "worker", "driver", "observer", "stop", "admin"})
#: The certificate roles that allow each hello role; ``admin`` allows everything.
_HELLO_NEEDS: Final[dict[Role, frozenset[str]]] = {
    Role.WORKER: frozenset({"worker", "admin"}),
    Role.DRIVER: frozenset({"driver", "admin"}),
    # A driver inside a worker process uses its worker's certificate; a client may call
    # any actor (a handle passed into its task), so a driver's certificate may not be one.
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


def not_given_text(oid: int) -> str:
    """The error to a worker answering for an object it was not asked for."""
    return (
        f"object {oid:#x} is not a task or actor call this worker was given "
        "(or it was taken back): its answer is dropped"
    )


def inline_cap_text(oid: int, number: int, cap: int) -> str:
    """The error for an inline result past its driver's cap."""
    return (
        f"object {oid:#x}: driver {number} keeps {_size(cap)} of inline results in the head, "
        "its cap (DISTA_HEAD_INLINE_CAP): release refs it no longer needs"
    )


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:g} s"


class HelloWatch:
    """Links that have not said hello yet, closed after ``deadline_ns`` since they connected
    or ``idle_ns`` without a byte (0: that check is off).

    Two deques, each in time order because time only moves forward: one entry per link at
    connect, and one per read before its hello (a hello is at most 46 bytes, so a link adds
    a bounded number). Entries of links that said hello since, or read again, are dropped
    when they reach the front: the cost is O(1) amortized per link.
    """

    def __init__(self, deadline_ns: int, idle_ns: int) -> None:
        if deadline_ns < 0 or idle_ns < 0:
            raise ValueError("hello_deadline_ns and hello_idle_ns must be >= 0 (0: off)")
        self.deadline_ns = deadline_ns
        self.idle_ns = idle_ns
        self._opened: deque[tuple[int, int]] = deque()  # (link, connected at)
        self._heard: deque[tuple[int, int]] = deque()  # (link, read at)
        self._last: dict[int, int] = {}  # un-greeted link -> when it last read

    def opened(self, link: int, now: int) -> None:
        if self.deadline_ns or self.idle_ns:
            self._last[link] = now
            if self.deadline_ns:
                self._opened.append((link, now))
            if self.idle_ns:
                self._heard.append((link, now))

    def heard(self, link: int, now: int) -> None:
        """``link`` read bytes (call only before its hello)."""
        if link in self._last and self._last[link] != now:
            self._last[link] = now
            if self.idle_ns:
                self._heard.append((link, now))

    def done(self, link: int) -> None:
        """``link`` said hello, or is gone: no longer watched."""
        self._last.pop(link, None)

    def watching(self, link: int) -> bool:
        return link in self._last

    def next_deadline(self) -> int | None:
        self._prune()
        times = []
        if self._opened:
            times.append(self._opened[0][1] + self.deadline_ns)
        if self._heard:
            times.append(self._heard[0][1] + self.idle_ns)
        return min(times) if times else None

    def _prune(self) -> None:
        last = self._last
        opened, heard = self._opened, self._heard
        while opened and opened[0][0] not in last:
            opened.popleft()
        while heard and last.get(heard[0][0]) != heard[0][1]:
            heard.popleft()

    def due(self, now: int, close: Callable[[int, str], None]) -> None:
        """Call ``close(link, why)`` for every watched link past its deadline or idle time."""
        last = self._last
        opened, heard = self._opened, self._heard
        while opened and (opened[0][0] not in last or opened[0][1] + self.deadline_ns <= now):
            link, _ = opened.popleft()
            if link in last:
                del last[link]
                close(link, f"no hello within {_seconds(self.deadline_ns)}")
        while heard and (
            last.get(heard[0][0]) != heard[0][1] or heard[0][1] + self.idle_ns <= now
        ):
            link, at = heard.popleft()
            if last.get(link) == at:
                del last[link]
                close(link, f"no hello, and nothing read for {_seconds(self.idle_ns)}")


class Guard(Recovery):
    """The security part of `Head`: what it checks of its peers beyond the protocol. (A
    link in the chain of bases, not a mixin: mypyc compiles single inheritance only.)"""

    _hello_watch: HelloWatch
    _inline_of: dict[int, int]  # driver number -> bytes of its inline results kept
    inline_cap_bytes: int

    # -- roles and hello -------------------------------------------------------------------

    def authenticated(self, link: int, roles: frozenset[str]) -> bool:
        """The peer on ``link`` proved a certificate granting ``roles`` (call before reading
        any byte). False if those roles may do nothing at a head: the head has forgotten the
        link and the binding closes it. Otherwise its hello and stop are bounded by them."""
        peer = self._peers.get(link)
        if peer is None:
            return False
        if not useful_roles(roles):
            self._peers.pop(link)
            self._hello_watch.done(link)
            self._links.forget(link)
            return False
        peer.roles = roles
        return True

    def greeted(self, link: int) -> bool:
        """Whether ``link`` has said hello; a link the head does not know counts as greeted,
        so a binding evicting the oldest un-greeted connection never picks a gone one."""
        peer = self._peers.get(link)
        return peer is None or peer.role is not None

    def _no_hello(self, link: int, why: str) -> None:
        """``link`` waited out its hello deadline or idle time (`HelloWatch`)."""
        if self._peers.pop(link, None) is not None:
            self._links.close(link, why)

    # -- isolation -------------------------------------------------------------------------

    def _foreign(self, peer: Peer, oid: int) -> bool:
        """Whether ``oid`` is another driver's (its number is not ``peer``'s): if so, say so.
        Refs cannot travel inside values, so the objects a driver holds are its own."""
        if not oid or oid >> ID_BITS == peer.number:
            return False
        self._links.send(peer.link, Error(oid, foreign_text(oid)))
        return True

    def _foreign_actor(self, peer: Peer, actor_id: int, oid: int) -> bool:
        """Whether a driver names another driver's actor (``oid``: the frame's own ID): if
        so, say so. Only its creator, and tasks' clients it passed a handle to, may kill an
        actor; another driver could otherwise guess its ID (a number `dista status` shows,
        then a count) and end it. (Calls stay open: a handle passed on out of band calls
        from another driver.)"""
        if peer.role != Role.DRIVER or actor_id >> ID_BITS == peer.number:
            return False
        why = f"actor {actor_id:#x} is not this driver's: only its creator and the tasks it "
        why += "passed a handle to may kill it"
        self._links.send(peer.link, Error(oid, why))
        return True

    def _foreign_input(self, peer: Peer, event: TaskAfter, results: int) -> bool:
        """Whether ``event`` names another driver's object as input: if so, it is not queued;
        the object is named, and so are the task's own results, so its refs fail readably."""
        number = peer.number
        for input_id in event.inputs:
            if input_id and input_id >> ID_BITS != number:
                self._foreign(peer, input_id)
                oid = event.object_id
                if oid >> ID_BITS == number and (oid & ID_MASK) + results - 1 <= ID_MASK:
                    why = foreign_text(input_id)
                    for i in range(oid, oid + min(results, 1 << 16)):
                        if i not in self._objects and i not in self._actors:
                            self._links.send(peer.link, Error(i, why))
                return True
        return False

    def _too_many(self, peer: Peer, oid: int, results: int) -> bool:
        """Whether a task of ``results`` results is past `MAX_RESULTS`: if so, say so."""
        if results <= MAX_RESULTS:
            return False
        why = f"a task has at most {MAX_RESULTS} results, not {results}"
        self._links.send(peer.link, Error(oid, why))
        return True

    def _not_given(self, worker: Peer, oid: int) -> None:
        """``worker`` answered for ``oid``, which is not with it: a forgery, or a task taken
        back or retried elsewhere. Dropped, and said (a worker ignores the error)."""
        if oid:
            self._links.send(worker.link, Error(oid, not_given_text(oid)))

    # -- the inline cap --------------------------------------------------------------------

    def inline_bytes(self, number: int) -> int:
        """Bytes of driver ``number``'s inline results the head keeps (its cap's count)."""
        return self._inline_of.get(number, 0)

    def _over_inline_cap(self, obj: TrackedObject) -> str | None:
        """Why ``obj``'s inline answer is not kept: its driver is at its cap (the task was
        sent before it got there, or to a worker that does not know `FREE_STORE`)."""
        cap = self.inline_cap_bytes
        number = obj.oid >> ID_BITS
        if cap and self._inline_of.get(number, 0) >= cap:
            return inline_cap_text(obj.oid, number, cap)
        return None

    def _count_inline(self, obj: TrackedObject) -> None:
        number = obj.oid >> ID_BITS
        self._inline_of[number] = self._inline_of.get(number, 0) + obj.size

    def _uncount_inline(self, obj: TrackedObject) -> None:
        number = obj.oid >> ID_BITS
        left = self._inline_of.get(number, 0) - obj.size
        if left > 0:
            self._inline_of[number] = left
        else:
            self._inline_of.pop(number, None)

    def _store_mark(self, oid: int, worker: Peer) -> None:
        """Before the task or actor call whose first result is ``oid`` goes to ``worker``:
        if its driver keeps its cap of inline results here, the worker is told to store its
        results whatever their size."""
        cap = self.inline_cap_bytes
        if cap and self._inline_of.get(oid >> ID_BITS, 0) >= cap:
            self._links.send(worker.link, Free(oid, FREE_STORE))
