"""Reaching the head again after losing it: backoff, a bound, and what the logs say.

A driver or worker whose core says `HeadLost` dials the head again: at once, then after
0.1 s, doubling up to 0.5 s (a head back after a restart is found within half a second),
for up to ``DISTA_RECONNECT_TIMEOUT`` seconds (60 by default). A dial that connects to a
head still going down (accepted, then reset before the dial reports) does not count.
A new head on the same address (restarted after a crash) takes the driver's resume or the
worker's holding. The first loss, every ~10 s of retrying, the success and giving up are
logged at WARNING (``dista.driver`` / ``dista.worker``), so an operator sees a head restart
in the workers' and drivers' output without turning logging on.

A worker whose first connection the head closes at once (a certificate whose role may not
join, no TLS against a TLS head) never had the head: it says it could not join, and why,
and tries for as long. One whose first dial finds no head at all (nothing listens there
yet) waits for it instead, for ``DISTA_WAIT_FOR_HEAD`` (`dista_runtime._hosts.wait`, whose
`backoff` this uses too).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

import dista_proto as dp

from .._net.address import format_head
from .._tls.config import dial_failure, refusal_hint
from .engine import Engine
from .liveness import RECONNECT_ENV as ENV
from .liveness import reconnect_timeout
from .wait import backoff

__all__ = ["Reconnect"]

_FIRST_S: Final = 0.1
_MAX_S: Final = 0.5
_DIAL_S: Final = 5.0
_SAY_EVERY_S: Final = 10.0
_SETTLE_S: Final = 2.0


class Reconnect:
    """Dials ``engine``'s head link again until it is up (``up``) or the bound passes
    (``give_up`` with why). The engine routes its head link's `dialed` here while
    `active`."""

    def __init__(
        self,
        engine: Engine,
        head: tuple[str, int],
        up: Callable[[], None],
        give_up: Callable[[str], None],
        describe: Callable[[], str] = lambda: "",
        timeout: float | None = None,
    ) -> None:
        self.engine = engine
        self.head = head
        self._up = up
        self._describe = describe
        self._give_up = give_up
        self.timeout = reconnect_timeout() if timeout is None else timeout
        self.active = False
        self.attempts = 0
        self._since = 0.0
        self._said = 0.0
        self._why = ""
        self._timer: Any = None
        self._up_at = -1e9
        self._reset = False
        #: Whether the head took us: its link lasted, or (a worker's) its tasks' session
        #: was welcomed. Until then a loss at once is a head that would not take us (a
        #: worker whose hello it refused), not a head lost.
        self.joined = False
        self._had_head = False  # whether the outage under way lost a head that took us

    def connected(self) -> None:
        """The engine's own first dial of the head connected (a worker's): a loss within
        moments, unless it was `joined`, is the head refusing us (`lost` says so)."""
        self._up_at = time.monotonic()

    def lost(self, why: str) -> None:
        """The head link went: start dialing again."""
        if self.active:
            # Lost while a dial was under way: a connection the dying head accepted and
            # reset before the dial reported it. That dial must not count as up.
            self._reset = True
            return
        self.active = True
        now = time.monotonic()
        at_once = now - self._up_at < _SETTLE_S
        if not at_once:
            self.joined = True  # the link lasted: the head had taken us
        if at_once and (self._since or not self.joined):
            # Lost right after connecting: a head still going down accepted us, or one that
            # refuses us (a TLS handshake it rejects, a hello it will not take).
            hint = refusal_hint(self.engine.tls is not None)
            why = f"the head closed the connection at once: {hint}"
            if self._since:
                # A failed attempt of the outage under way, already said, with its backoff
                # and its bound.
                self.dialed(why)
                return
        self._why = why
        self._had_head = self.joined
        self.attempts = 0
        self._since = self._said = now
        where = format_head(*self.head)
        if self._had_head:
            self.engine.log.warning(
                "dista %s: lost the head at %s (%s); reconnecting for up to %g s (%s)",
                self.engine.name,
                where,
                why,
                self.timeout,
                ENV,
            )
        else:  # its first connection, closed at once: it never had the head
            self.engine.log.warning(
                "dista %s: could not join the head at %s (%s); trying again for up to %g s (%s)",
                self.engine.name,
                where,
                why,
                self.timeout,
                ENV,
            )
        self._dial()

    @property
    def down_for(self) -> float:
        """Seconds since the head was lost."""
        return time.monotonic() - self._since

    def _dial(self) -> None:
        self._timer = None
        self._reset = False
        self.attempts += 1
        self.engine.dial(dp.HEAD_LINK, *self.head, _DIAL_S)

    def dialed(self, error: str) -> None:
        """The engine's head link dial ended (``error`` empty: connected)."""
        if not error and (self._reset or dp.HEAD_LINK not in self.engine.transports):
            error = "the connection closed as soon as it opened"
        if error:
            error = dial_failure(error, self.engine.tls)  # another CA's head: say so
        if not error:
            self.active = False
            self._up_at = time.monotonic()
            took = self.down_for
            self._up()
            # Said once the link has lasted a moment: a head still going down may accept
            # and reset, and that is not being back.
            self.engine.loop.call_later(_SETTLE_S / 4, self._say_up, took, self.attempts)
            return
        now = time.monotonic()
        waited = now - self._since
        where = format_head(*self.head)
        if waited >= self.timeout:
            self.active = False
            if self._had_head:
                self._give_up(
                    f"the head at {where} was lost ({self._why}) and could not be reached "
                    f"again in {self.timeout:g} s ({ENV}; last: {error})"
                )
            else:
                self._give_up(
                    f"could not join the head at {where} in {self.timeout:g} s ({ENV}; "
                    f"last: {error})"
                )
            return
        if now - self._said >= _SAY_EVERY_S:
            self._said = now
            self.engine.log.warning(
                "dista %s: still no head at %s after %.0f s (%d attempts; last: %s)",
                self.engine.name,
                where,
                waited,
                self.attempts,
                error,
            )
        delay = min(backoff(self.attempts, _FIRST_S, _MAX_S), self.timeout - waited)
        self._timer = self.engine.loop.call_later(max(delay, 0.0), self._dial)

    def _say_up(self, took: float, attempt: int) -> None:
        if self.active or attempt != self.attempts or dp.HEAD_LINK not in self.engine.transports:
            return  # lost again since: a later dial says it
        said = self._describe()
        self.joined = True
        again = "again " if self._had_head else ""  # else: a worker the head took at last
        self.engine.log.warning(
            "dista %s: reached the head at %s %safter %.1f s%s",
            self.engine.name,
            format_head(*self.head),
            again,
            took,
            f"; {said}" if said else "",
        )

    def cancel(self) -> None:
        self.active = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
