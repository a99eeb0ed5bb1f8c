"""Connection accounting: which incoming connections a head or an object server takes.

Every binding attaches a connection to its engine before it reads a byte of it
(`dista_runtime._hosts.engine.Engine.attach`), so the caps are kept there, once for asyncio, anyio
and gevent alike. A connection from a listener (the engine's ``accept`` marks it,
`Admission.expect`) is counted against two caps of `dista_runtime._net.limits.Limits`:

- per host (the peer's IP; every Unix-socket peer is one host, "this machine"): past it,
  the oldest connection from that host that has not said hello yet is closed to make room
  (so that silent connections from a driver's own host cannot lock it out);
- in total: past it, the oldest connection that has not said hello yet (the engine's
  ``greeted``) is closed to make room, so that silent connections can never lock real
  drivers and workers out.

At either cap, if every connection concerned has said hello, the new one is refused.

A refused or evicted peer gets an error frame saying why (object 0: "the connection was
refused"), then the connection closes. In-process links (no socket) are not counted.

Refusals are logged at most once a second per kind with a count (`Throttled`): the first at
once, then how many followed in each second while they go on. A flood of connections
otherwise writes a line each, and a log that grows by megabytes is a second way to knock a
head over. The bindings' listeners log their accept errors (out of descriptors) the same
way.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, Final

import dista_proto as dp

from .limits import MAX_CONNECTIONS_ENV, MAX_PER_HOST_ENV, Limits

__all__ = [
    "ACCEPT_REST_S",
    "THROTTLE_S",
    "AcceptErrors",
    "Admission",
    "Throttle",
    "Throttled",
    "peer_host",
]

#: Lines of one kind are logged at most this often.
THROTTLE_S: Final = 1.0
#: How long a listener that cannot accept for want of descriptors or memory rests, as
#: asyncio's does, rather than spin on a socket that stays readable.
ACCEPT_REST_S: Final = 1.0
#: The accept errors a listener rests after (asyncio's list); others are one connection's.
_RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: The host every Unix-socket peer counts as.
LOCAL_HOST: Final = "this machine (Unix socket)"

CallLater = Callable[[float, Callable[[], object]], object]


class Throttled:
    """A log line for an event that may come thousands of times a second: the first at
    once, then, each second while more come, one line with how many came in it."""

    __slots__ = ("_call_later", "_counts", "_log", "_plural", "_prefix", "_why")

    def __init__(self, log: logging.Logger, prefix: str, call_later: CallLater) -> None:
        self._log = log
        self._prefix = prefix  # "dista head"
        self._call_later = call_later
        self._counts: dict[str, int] = {}  # kind -> how many since the last line; open window
        self._why: dict[str, str] = {}  # kind -> the reason of the latest one
        self._plural: dict[str, str] = {}

    def note(self, singular: str, plural: str, why: str) -> None:
        """One more event of kind ``singular`` ("connection refused"), for ``why``."""
        if singular in self._counts:
            self._counts[singular] += 1
            self._why[singular] = why
            return
        self._log.warning("%s: 1 %s: %s", self._prefix, singular, why)
        self._counts[singular] = 0
        self._plural[singular] = plural
        self._call_later(THROTTLE_S, lambda: self._flush(singular))

    def _flush(self, kind: str) -> None:
        count = self._counts.pop(kind, 0)
        if not count:
            return  # a quiet second: the next event is logged at once again
        noun = kind if count == 1 else self._plural[kind]
        why = self._why.pop(kind, "")
        self._log.warning("%s: %d %s in the last second: %s", self._prefix, count, noun, why)
        self._counts[kind] = 0
        self._call_later(THROTTLE_S, lambda: self._flush(kind))


def peer_host(transport: Any) -> str | None:
    """Whom ``transport`` counts against: its peer's IP, `LOCAL_HOST` for a Unix socket,
    None for an in-process link (not counted)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return None
    if sock.family == getattr(socket, "AF_UNIX", None):
        return LOCAL_HOST
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return "(unknown address)"  # gone before it was asked: counted, and soon released


class Admission:
    """The caps of ``limits`` over one engine's incoming connections (module docstring).

    ``greeted(link)`` says whether a link has said hello; ``name`` is the engine's ("head"),
    for the log lines and error frames."""

    def __init__(
        self,
        limits: Limits,
        greeted: Callable[[int], bool],
        log: logging.Logger,
        name: str,
        call_later: CallLater,
    ) -> None:
        self.limits = limits
        self._greeted = greeted
        self._name = name
        self._expected: set[int] = set()
        self._links: dict[int, tuple[str, Any]] = {}  # link -> (host, transport), oldest first
        self._silent: dict[int, None] = {}  # links maybe not greeted yet, oldest first
        self._per_host: Counter[str] = Counter()
        self._log = Throttled(log, f"dista {name}", call_later)

    @property
    def count(self) -> int:
        """The connections counted now."""
        return len(self._links)

    def expect(self, link: int) -> None:
        """``link`` came in through a listener: admit it when it is attached."""
        self._expected.add(link)

    def admit(self, link: int, transport: Any) -> bool:
        """Whether ``link`` (attached now, nothing read) may stay; if not, it was told why
        and closed (the caller makes the core forget it)."""
        if link not in self._expected:
            return True  # one we dialed
        self._expected.discard(link)
        host = peer_host(transport)
        if host is None:
            return True  # in-process
        limits = self.limits
        # At a cap, the oldest connection that has not said hello (from this host, at the
        # per-host cap) goes for the new one: silent connections from a driver's own host
        # must not lock it out. Only when all have said hello is the new one refused.
        if self._per_host[host] >= limits.max_per_host:
            cap = f"the cap of {limits.max_per_host} from {host} ({MAX_PER_HOST_ENV})"
            if not self._make_room(transport, cap, host):
                return False
        if len(self._links) >= limits.max_connections:
            cap = f"the cap of {limits.max_connections} connections ({MAX_CONNECTIONS_ENV})"
            if not self._make_room(transport, cap, None):
                return False
        self._links[link] = (host, transport)
        self._silent[link] = None
        self._per_host[host] += 1
        return True

    def release(self, link: int) -> None:
        """``link`` is gone (or going): it no longer counts."""
        self._expected.discard(link)
        entry = self._links.pop(link, None)
        if entry is None:
            return
        self._silent.pop(link, None)
        host = entry[0]
        self._per_host[host] -= 1
        if self._per_host[host] <= 0:
            del self._per_host[host]

    def _make_room(self, transport: Any, cap: str, host: str | None) -> bool:
        """At ``cap``: close the oldest connection that has not said hello (from ``host``,
        if given) for the new one; if there is none, refuse the new one (False)."""
        victim = self._oldest_silent(host)
        if victim is None:
            why = f"over {cap}, all of them past their hello"
            self._refuse(transport, why)
            self._log.note("connection refused", "connections refused", why)
            return False
        _, old = self._links[victim]
        self.release(victim)
        why = f"closed for a newer one at {cap}"
        self._refuse(old, f"{why}: it had not said hello")
        self._log.note(
            "connection that had not said hello closed",
            "connections that had not said hello closed",
            why,
        )
        return True

    def _oldest_silent(self, host: str | None = None) -> int | None:
        """The oldest counted link (from ``host``, if given) that has not said hello; each
        greeted one is dropped from the candidates when met (a link says hello once), so
        the search is cheap."""
        silent = self._silent
        found = None
        greeted = []
        for link in silent:
            if self._greeted(link):
                greeted.append(link)
            elif not self._links[link][1].is_closing() and (
                host is None or self._links[link][0] == host
            ):
                found = link
                break
        for link in greeted:
            del silent[link]
        return found

    def _refuse(self, transport: Any, why: str) -> None:
        """Tell the peer why in an error frame (object 0: the connection was refused), then
        close; it is never read."""
        if not transport.is_closing():
            message = f"the {self._name} refused the connection: {why}"
            try:
                transport.write(dp.encode_event(dp.Error(0, message), from_head=True))
            except (OSError, RuntimeError):
                pass  # gone already: closing is all there is to do
            transport.close()


class AcceptErrors:
    """What a binding's listener does when ``accept`` fails: `failed` logs the error
    (`Throttled`) and says how long to rest before accepting again."""

    __slots__ = ("_log",)

    def __init__(self, engine: Any, call_later: CallLater) -> None:
        name = getattr(engine, "name", "")
        log = getattr(engine, "log", None) or logging.getLogger("dista")
        self._log = Throttled(log, f"dista {name}" if name else "dista", call_later)

    def failed(self, error: OSError) -> float:
        """Seconds to rest after ``error``: `ACCEPT_REST_S` when the process is out of
        descriptors or memory (the socket stays readable, and accepting at once would spin
        and log without end), else 0 (the connection that failed is gone; go on)."""
        if error.errno not in _RESOURCE_ERRNOS:
            return 0.0
        self._log.note(
            "connection not accepted",
            "connections not accepted",
            f"{error.strerror or error} (the listener rests {ACCEPT_REST_S:g} s each time; "
            f"raise the open-file limit, ulimit -n, or lower {MAX_CONNECTIONS_ENV})",
        )
        return ACCEPT_REST_S


class Throttle:
    """At most `BURST` log lines a second, then a count of the rest on the next line: a
    flood of refused peers must not become a flood of lines (a fuzzer's million frames
    wrote megabytes), while a few bad peers each get theirs."""

    BURST: ClassVar[int] = 10

    def __init__(self) -> None:
        self._since = -1.0  # when this second began
        self._lines = 0  # lines written in it
        self._skipped = 0

    def note(self, log: logging.Logger, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._since >= 1.0:
            self._since, self._lines = now, 0
        if self._lines >= self.BURST:
            self._skipped += 1
            return
        if self._skipped:
            message += f" (and {self._skipped} more like it not logged)"
            self._skipped = 0
        self._lines += 1
        log.warning(message, *args)
