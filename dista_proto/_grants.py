"""Fetch grants: which fetcher a worker's object server answers.

Theory of operation
-------------------
Object-server links carry no hello, so a fetcher is known by the token its fetches show,
its host (the binding reports it with `FetchGate.peer`) and, over TLS, its certificate's
roles (`authenticated`). A cluster member (a `worker` or `admin` certificate) may fetch
anything this server holds; any other fetcher may fetch an object only once the head has
granted it: before the head tells a fetcher where an object lies (located, task-inputs,
adopt) it sends the holding worker a located frame naming the fetcher's host, port 0, and,
for a driver with a secret, its fetch token (`dista_proto._credentials`). A fetch showing a
token is served only if that token was granted for that object, whatever its host (another
process on the driver's machine has no token); a fetch without one only by a grant made
without a token to its host, and never on a link whose certificate says ``driver`` (such a
driver has a token). A grant to a loopback host means "the head's own machine": the head
host this worker sees, or loopback.

The grant races the fetch (they travel on different links), so a fetch the gate does not
allow yet waits for one, up to ``wait_ns``; then it is refused with an error frame naming
the object, and the link stays usable. Grants die with their object (`drop`). A link that
sends no complete frame within ``idle_ns`` of connecting is closed (`expired`).

Everything is bounded: grants only for objects in the store, at most `MAX_HOSTS` hosts
(and as many tokens) per object, at most `MAX_WAITING_PER_LINK` waiting fetches per link and `MAX_WAITING` in all
(past them a fetch is refused at once).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TypeVar

from ._events import Fetch

__all__ = [
    "FETCH_GRANT_WAIT_NS",
    "FETCH_IDLE_NS",
    "MEMBER_ROLES",
    "FetchGate",
    "canonical_host",
    "is_loopback",
]

#: How long a fetch the head has not granted (yet) waits for the grant before it is refused.
FETCH_GRANT_WAIT_NS: Final = 5_000_000_000
#: An object-server link that sends no complete frame this long after connecting is closed.
FETCH_IDLE_NS: Final = 10_000_000_000
#: Certificate roles that make a fetcher a cluster member: it may fetch anything.
MEMBER_ROLES: Final = frozenset({"worker", "admin"})
#: Certificate roles that may fetch what the head granted to their host.
_GRANTED_ROLES: Final = frozenset({"driver"})
#: Hosts one object is granted to, at most (the oldest grant goes first): a cluster's
#: hosts, all taking one object as input, stay well inside it; a head gone wrong does not.
MAX_HOSTS: Final = 4096
#: Fetches waiting for a grant, per link and in all; past them a fetch is refused at once.
MAX_WAITING_PER_LINK: Final = 256
MAX_WAITING: Final = 16_384
_K = TypeVar("_K", str, bytes)

#: Marks a grant to the head's own machine (a loopback grant).
_HEAD_MACHINE: Final = ""

_WHY: Final = (
    "only a peer the head told where the object lies (a driver by its fetch token, another "
    "peer from the host the head saw it connect from), or a cluster member (a worker or "
    "admin certificate over TLS), may fetch it"
)


def canonical_host(host: str) -> str:
    """``host`` as grants compare it: lower case, without brackets, an IPv4-mapped IPv6
    address as its IPv4 address."""
    h = host.strip().lower()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if h.startswith("::ffff:") and "." in h:
        h = h[7:]
    return h


def is_loopback(host: str) -> bool:
    h = canonical_host(host)
    return h.startswith("127.") or h in ("::1", "localhost")


class _Link:
    """What the gate knows of one object-server link."""

    __slots__ = ("driver", "heard", "host", "member", "waiting")

    def __init__(self) -> None:
        self.host = ""  # canonical; "" until `peer`
        self.member = False
        self.driver = False  # a driver certificate: it fetches with its token only
        self.waiting: set[int] = set()  # keys of its fetches waiting for a grant
        self.heard = False  # it sent a complete frame


class FetchGate:
    """Grants, the fetches waiting for one, and idle links; see the module docstring."""

    def __init__(self, *, check: bool, wait_ns: int, idle_ns: int, own_host: str) -> None:
        if wait_ns < 0 or idle_ns < 0:
            raise ValueError(f"wait_ns and idle_ns must be at least 0, not {wait_ns}, {idle_ns}")
        self.check = check
        self.wait_ns = wait_ns
        self.idle_ns = idle_ns
        self._own_host = canonical_host(own_host)
        self._head_host = ""
        self._links: dict[int, _Link] = {}
        self._grants: dict[int, dict[str, None]] = {}  # object -> hosts, oldest first
        self._tokens: dict[int, dict[bytes, None]] = {}  # object -> fetch tokens, oldest first
        # Waiting fetches in arrival order (so deadline order): key -> (link, fetch, until),
        # and by object, so that a grant or a closed link touches only its own.
        self._waiting: dict[int, tuple[int, Fetch, int]] = {}
        self._waiting_for: dict[int, set[int]] = {}  # object -> keys
        self._next_key = 0
        self._silent: dict[int, int] = {}  # link -> when it is closed, arrival order

    # -- links ---------------------------------------------------------------------------

    def opened(self, link: int, now: int) -> None:
        self._links[link] = _Link()
        if self.idle_ns:
            self._silent[link] = now + self.idle_ns

    def peer(self, link: int, host: str) -> None:
        state = self._links.get(link)
        if state is not None:
            state.host = canonical_host(host)

    def head_host(self, host: str) -> None:
        """The host this worker's head link comes from, as this worker sees it."""
        self._head_host = canonical_host(host)

    def authenticated(self, link: int, roles: Iterable[str]) -> bool:
        """A TLS fetcher's certificate roles: whether it may fetch at all."""
        state = self._links.get(link)
        if state is None:
            return False
        names = frozenset(roles)
        if names & MEMBER_ROLES:
            state.member = True
            return True
        state.driver = bool(names & _GRANTED_ROLES)
        return state.driver

    def heard(self, link: int) -> None:
        """A complete frame came on ``link``: it is not a silent link."""
        state = self._links.get(link)
        if state is not None and not state.heard:
            state.heard = True
            self._silent.pop(link, None)

    def greeted(self, link: int) -> bool:
        """Whether ``link`` sent a complete frame; a link the gate does not know counts."""
        state = self._links.get(link)
        return state is None or state.heard

    def closed(self, link: int) -> None:
        state = self._links.pop(link, None)
        self._silent.pop(link, None)
        if state is not None:
            for key in state.waiting:
                self._unwait(key)

    def _unwait(self, key: int) -> tuple[int, Fetch, int]:
        """Forget waiting fetch ``key`` everywhere but its link's set."""
        waiter = self._waiting.pop(key)
        oid = waiter[1].object_id
        keys = self._waiting_for[oid]
        keys.discard(key)
        if not keys:
            del self._waiting_for[oid]
        return waiter

    # -- grants --------------------------------------------------------------------------

    def grant(
        self, oid: int, host: str, held: bool, token: bytes = b""
    ) -> list[tuple[int, Fetch]]:
        """The head grants ``oid`` to the fetcher showing ``token`` or, without one, to
        ``host``; ``held``: whether the store has it (a grant for an object gone meanwhile is
        dropped). Returns the waiting fetches it lets in."""
        if not held:
            return []
        if token:
            _remember(self._tokens.setdefault(oid, {}), token)
        else:
            name = _HEAD_MACHINE if is_loopback(host) else canonical_host(host)
            _remember(self._grants.setdefault(oid, {}), name)
        keys = self._waiting_for.get(oid)
        if not keys:
            return []
        let_in: list[tuple[int, Fetch]] = []
        for key in sorted(keys):  # in the order they came
            link, fetch, _ = self._waiting[key]
            if self._allows(link, fetch):
                self._unwait(key)
                self._links[link].waiting.discard(key)
                let_in.append((link, fetch))
        return let_in

    def drop(self, oid: int) -> None:
        """``oid`` left the store: its grants go with it."""
        self._grants.pop(oid, None)
        self._tokens.pop(oid, None)

    def _allows(self, link: int, fetch: Fetch) -> bool:
        state = self._links.get(link)
        if state is None:
            return False
        if state.member:
            return True
        oid = fetch.object_id
        if fetch.token:
            return fetch.token in self._tokens.get(oid, ())
        if state.driver:
            return False  # a driver certificate's fetches show its token
        hosts = self._grants.get(oid)
        if not hosts or not state.host:
            return False
        host = state.host
        if host in hosts:
            return True
        # A grant to the head's machine: the fetcher came from there, or from this machine
        # when the head runs here (then any of this machine's addresses will do).
        if _HEAD_MACHINE in hosts:
            if is_loopback(host) or host == self._head_host:
                return True
            return is_loopback(self._head_host) and host == self._own_host
        return False

    # -- fetches -------------------------------------------------------------------------

    def admit(self, link: int, fetch: Fetch, now: int) -> str | None:
        """None: serve ``fetch`` now. "": it waits for a grant. Else: refuse it with this."""
        if not self.check or self._allows(link, fetch):
            return None
        state = self._links.get(link)
        if state is None:
            return None  # not an object-server link of ours: the worker never asks
        if (
            self.wait_ns == 0
            or len(state.waiting) >= MAX_WAITING_PER_LINK
            or len(self._waiting) >= MAX_WAITING
        ):
            return self.refusal(link, fetch.object_id, "")
        key = self._next_key
        self._next_key += 1
        state.waiting.add(key)
        self._waiting[key] = (link, fetch, now + self.wait_ns)
        self._waiting_for.setdefault(fetch.object_id, set()).add(key)
        return ""

    def refusal(self, link: int, oid: int, waited: str) -> str:
        """The error a fetch of ``oid`` on ``link`` gets (``waited``: how long it waited)."""
        state = self._links.get(link)
        who = state.host if state is not None and state.host else "this peer (host unknown)"
        return f"object {oid:#x} was not offered to {who} by the head{waited}: {_WHY}"

    # -- time ----------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        times = []
        if self._waiting:
            times.append(next(iter(self._waiting.values()))[2])
        if self._silent:
            times.append(next(iter(self._silent.values())))
        return min(times) if times else None

    def expired(self, now: int) -> tuple[list[tuple[int, int, str]], list[int]]:
        """The fetches whose wait ran out, as (link, object, error message), and the links
        that stayed silent too long (the worker closes them)."""
        refused = []
        waited = f" within {self.wait_ns / 1e9:g} s"
        while self._waiting:
            key, (link, fetch, until) = next(iter(self._waiting.items()))
            if until > now:
                break
            self._unwait(key)
            state = self._links.get(link)
            if state is not None:
                state.waiting.discard(key)
            oid = fetch.object_id
            refused.append((link, oid, self.refusal(link, oid, waited)))
        silent = []
        while self._silent:
            link, until = next(iter(self._silent.items()))
            if until > now:
                break
            del self._silent[link]
            silent.append(link)
        return refused, silent


def _remember(granted: dict[_K, None], key: _K) -> None:
    """Add ``key`` to ``granted`` as its newest, keeping at most `MAX_HOSTS` (the oldest go)."""
    granted.pop(key, None)
    granted[key] = None
    if len(granted) > MAX_HOSTS:
        del granted[next(iter(granted))]
