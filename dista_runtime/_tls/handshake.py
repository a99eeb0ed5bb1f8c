"""Mutual TLS below an engine's connections: what a listener or a dial needs to secure them,
and what follows a handshake.

An engine in TLS holds one `Handshakes`. It gives `Loop.listen` its ``accepting`` side and
`Loop.dial` its ``dialing`` side (`dista_runtime._net.contract.Secure`): the context to wrap
each connection with, and the two calls a handshake ends in. Neither is part of the
engine's `Connections`: a binding hands a connection to the engine as before, and TLS is
the layer under it (asyncio's own TLS transports, or `dista_runtime._tls.stream.TLSStream`
for the loops that run tasks).

- ``secured``: the peer's certificate is known, before any frame is read. A connection we
  dialed must show the role expected there (the head on the head link, else a worker); one
  that came in must show a role its engine's core lets in (``authenticated``). Otherwise
  one line says who was refused and why, and the connection is closed.
- ``failed``: the handshake failed (no certificate, another CA's, an expired one): one
  line naming the peer. The head link's reason is kept (``head_failure``): a driver's
  error says it.

Both kinds of line are throttled: a flood of bad peers is not a flood of lines.

A listener tells the accepting side of each handshake it begins (``begin``, with a way to
cancel it) and of its end (``settle``): once the engine has its limits (`Handshakes.bound`),
pending handshakes are bounded per source and in total, the oldest closed for the newest
(`dista_runtime._net.pending`), and each has the deadline ``timeout``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any

import dista_proto as dp

from .._net.admission import CallLater, Throttle
from .._net.contract import Stream
from .._net.limits import EVICTING, UNATTACHED, Limits
from .._net.pending import PendingHandshakes
from .._net.streams import peer_name
from .config import (
    HANDSHAKE_TIMEOUT_S,
    TLS,
    PeerIdentity,
    dialed_ok,
    expected_role,
    peer_identity,
    peer_roles,
)

__all__ = ["Handshakes", "Side"]


class Handshakes:
    """The TLS of an engine named ``name`` (its log lines go to ``log``): ``attached``
    says whether a link is still the engine's (one refused by a connection cap is not),
    ``authenticated`` whether a peer that came in with ``roles`` (and a certificate whose
    identity it is given) may stay."""

    def __init__(
        self,
        tls: TLS,
        name: str,
        log: logging.Logger,
        attached: Callable[[int], bool],
        authenticated: Callable[[int, frozenset[str], PeerIdentity], bool],
    ) -> None:
        self.tls = tls
        self._name = name
        self._log = log
        self._attached = attached
        self._authenticated = authenticated
        self._refusals = Throttle()  # peers whose role may not be here
        self._failures = Throttle()  # handshakes that failed
        #: Why the head link's last handshake failed ("" if none did).
        self.head_failure = ""
        #: The handshakes begun and not done, once `bound`.
        self.pending: PendingHandshakes | None = None
        #: How long an accepted connection's handshake may take (seconds; 0: no deadline).
        self.timeout = HANDSHAKE_TIMEOUT_S
        #: For `Loop.listen`, and for `Loop.dial`.
        self.accepting = Side(self, tls.server, server_side=True)
        self.dialing = Side(self, tls.client, server_side=False)

    def bound(self, limits: Limits, call_later: CallLater) -> None:
        """Keep ``limits`` on the handshakes of connections that come in."""
        self.pending = PendingHandshakes(limits, self._log, self._name, call_later)
        self.timeout = limits.handshake_timeout

    def secured(self, link: int, stream: Stream, dialed: bool) -> None:
        """``link``'s handshake is done: close it, with one line, if its peer's role may
        not be here."""
        if not self._attached(link):
            return  # refused when attached (a connection cap): nothing to check
        roles = peer_roles(stream)
        if dialed:
            head = link == dp.HEAD_LINK
            if dialed_ok(roles, head):
                return
            why = f"it is not a {expected_role(head)}"
        elif self._authenticated(link, roles, peer_identity(stream)):
            return
        else:
            why = f"that role may not connect to a {self._name}"
        granted = ", ".join(sorted(roles)) or "no role"
        self._refusals.note(
            self._log,
            f"dista {self._name}: refused peer %s (link %d): its certificate grants "
            f"{granted}: {why}",
            peer_name(stream.get_extra_info("peername")),
            link,
        )
        stream.close()

    def failed(self, link: int, peername: Any, why: str | BaseException) -> None:
        """A handshake with ``peername`` failed (``link`` is `ACCEPT_LATER` for one that
        came in and was not counted yet). One that came in and closed before its hello
        (an orchestrator's TCP probe, a port scan) is logged at DEBUG only."""
        text = _reason(why)
        if link == dp.HEAD_LINK:
            self.head_failure = text
        if link != dp.HEAD_LINK and isinstance(why, (ConnectionResetError, ssl.SSLEOFError)):
            self._log.debug(
                "dista %s: %s closed before its TLS hello", self._name, peer_name(peername)
            )
            return
        self._failures.note(
            self._log,
            f"dista {self._name}: TLS handshake with %s failed: {text}",
            peer_name(peername),
        )


def _reason(why: str | BaseException) -> str:
    if isinstance(why, ssl.SSLError) and why.reason:
        return why.reason
    return why if isinstance(why, str) else str(why) or type(why).__name__


class Side:
    """One side of ``handshakes`` (a `dista_runtime._net.contract.Secure`): the accepting
    one (``server_side``) or the dialing one."""

    __slots__ = ("_handshakes", "context", "server_side")

    def __init__(self, handshakes: Handshakes, context: ssl.SSLContext, *, server_side: bool):
        self._handshakes = handshakes
        self.context = context
        self.server_side = server_side

    @property
    def timeout(self) -> float:
        return self._handshakes.timeout if self.server_side else HANDSHAKE_TIMEOUT_S

    @property
    def most_pending(self) -> int:
        pending = self._handshakes.pending
        if pending is None or not self.server_side:
            return UNATTACHED
        # Past the cap by a margin, so that a new one is taken and evicts the oldest rather
        # than waiting in the kernel; above UNATTACHED, each takes a descriptor beyond the
        # reserve (the setting says so).
        return max(UNATTACHED, pending.limits.max_handshakes + EVICTING)

    def begin(self, peername: Any, cancel: Callable[[], object]) -> int:
        pending = self._handshakes.pending
        if pending is None or not self.server_side:
            return 0
        host = peername[0] if isinstance(peername, tuple) and peername else str(peername)
        return pending.begin(str(host), cancel)

    def settle(self, ticket: int) -> None:
        pending = self._handshakes.pending
        if ticket and pending is not None:
            pending.settle(ticket)

    def secured(self, link: int, stream: Stream) -> None:
        self._handshakes.secured(link, stream, dialed=not self.server_side)

    def failed(self, link: int, peername: Any, why: str | BaseException) -> None:
        self._handshakes.failed(link, peername, why)
