"""TLS handshakes a listener has begun and not finished: bounded per source and in total.

Theory of operation
-------------------
A connection that came in to a TLS listener costs a descriptor and the handshake's state
before the engine ever counts it (`dista_runtime._net.admission` counts a connection once
it is attached, after its handshake). Silent peers (a plain TCP connect that never sends
a ClientHello) would otherwise hold those places until the handshake's deadline, and a
listener that stops accepting at a bound leaves legitimate peers waiting in the kernel's
queue behind them: with 110 such connections, every driver waited 8 s.

So a listener takes every connection and tells `PendingHandshakes.begin`, with a way to
cancel it; `settle` when its handshake is over, whichever way. A new one past a cap is
never refused: the OLDEST pending handshake goes for it, the oldest from the same source
when that source is at its own cap (`Limits.max_handshakes_per_host`), else the oldest of
all (`Limits.max_handshakes`). A legitimate peer amid a flood from its own host therefore
gets in as long as it finishes its handshake before that many newer connections arrive,
which a peer that answers at once does in a few milliseconds. Each pending handshake also
has a deadline (`Limits.handshake_timeout`, the listener's to keep).

Every eviction is one throttled log line (a count each second while they go on).
Both operations are O(1): insertion-ordered dicts, oldest first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from .admission import CallLater, Throttled
from .limits import MAX_HANDSHAKES_ENV, MAX_HANDSHAKES_PER_HOST_ENV, Limits

__all__ = ["PendingHandshakes"]

_EVICTED: Final = ("pending TLS handshake closed", "pending TLS handshakes closed")


class PendingHandshakes:
    """The handshakes of one engine's listeners (module docstring)."""

    __slots__ = ("_all", "_by_host", "_log", "_next", "limits")

    def __init__(self, limits: Limits, log: logging.Logger, name: str, call_later: CallLater):
        self.limits = limits
        self._next = 0
        # ticket -> (host, cancel), oldest first
        self._all: dict[int, tuple[str, Callable[[], object]]] = {}
        self._by_host: dict[str, dict[int, None]] = {}  # host -> its tickets, oldest first
        self._log = Throttled(log, f"dista {name}", call_later)

    @property
    def count(self) -> int:
        """Handshakes pending now."""
        return len(self._all)

    def begin(self, host: str, cancel: Callable[[], object]) -> int:
        """A connection from ``host`` began its handshake: its ticket for `settle`.
        ``cancel`` ends it (and closes its connection) if it is evicted."""
        limits = self.limits
        mine = self._by_host.get(host)
        if mine is not None and len(mine) >= limits.max_handshakes_per_host:
            self._evict(
                next(iter(mine)),
                f"{limits.max_handshakes_per_host} from {host} at once "
                f"({MAX_HANDSHAKES_PER_HOST_ENV}): the oldest goes for the newest",
            )
        elif len(self._all) >= limits.max_handshakes:
            self._evict(
                next(iter(self._all)),
                f"{limits.max_handshakes} at once ({MAX_HANDSHAKES_ENV}): "
                "the oldest goes for the newest",
            )
        self._next += 1
        ticket = self._next
        self._all[ticket] = (host, cancel)
        self._by_host.setdefault(host, {})[ticket] = None
        return ticket

    def settle(self, ticket: int) -> None:
        """``ticket``'s handshake is over (done, failed, timed out or evicted): once or more."""
        entry = self._all.pop(ticket, None)
        if entry is None:
            return
        host = entry[0]
        mine = self._by_host[host]
        del mine[ticket]
        if not mine:
            del self._by_host[host]

    def _evict(self, ticket: int, why: str) -> None:
        cancel = self._all[ticket][1]
        self.settle(ticket)
        self._log.note(*_EVICTED, why)
        cancel()
