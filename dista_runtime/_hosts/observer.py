"""The observer on any loop: one question to the head (status, timeline, stop).

The `Observer` core says hello and reads the answer; this only moves its bytes and turns
its decisions into the answer (or a `ConnectionError` that says why there is none).
"""

from __future__ import annotations

import dista_proto as dp

from .._clock import now
from .._net.address import format_head
from .._net.contract import Loop
from .._net.latch import Latch
from .._tls.config import dial_failure, refusal_hint
from .engine import Engine

__all__ = ["ObserverHost", "ask"]

Request = dp.Status | dp.Timeline | dp.Stop | dp.Labels


class ObserverHost(Engine):
    """``answer`` is settled with the head's answer (None for stop, which has none)."""

    role_name = "observer"
    tls_role = "observer"
    core: dp.Observer

    def __init__(self, loop: Loop, request: Request, where: str, timeout: float) -> None:
        super().__init__(loop, dp.Observer())
        self.route(dp.Answered, self._answered)
        self.route(dp.Refused, self._refused)
        self.request = request
        self.where = where
        self.answer: Latch[dp.Event | None] = Latch()
        self.answer.add_callback(self._done)
        self._heard = False
        self._give_up = loop.call_later(
            timeout, self._fail, f"no answer from the head at {where} in {timeout} s"
        )

    def dialed(self, link: int, error: str) -> None:
        if error:
            why = dial_failure(error, self.tls)
            self._fail(f"cannot reach a Dista head at {self.where}: {why}")
            return
        at = now()
        self.core.start(at)
        if isinstance(self.request, dp.Stop):
            # A stop has no answer, and a head that refused our hello closes the link as
            # one that stops does: a status first tells them apart.
            self.core.ask(dp.Status(), at)
        self.core.ask(self.request, at)
        self.transmit()

    def lost(self, link: int) -> None:
        self.core.connection_lost(link, now())
        if isinstance(self.request, dp.Stop) and self._heard:
            # The head took our hello (it answered the status), then closed: it stopped.
            # A stop it refuses (a certificate without the stop grant) gets an error frame.
            self.answer.set(None)
        self._fail(
            f"the head at {self.where} closed the connection without an answer; "
            + refusal_hint(self.tls is not None)
        )
        self.transmit()  # after the answer: its exit would say "no answer"

    def _answered(self, decision: dp.Answered) -> None:
        if isinstance(self.request, dp.Stop):
            self._heard = True  # the status before it (see `dialed`)
        else:
            self.answer.set(decision.answer)

    def _refused(self, decision: dp.Refused) -> None:
        self._fail(f"the head refused: {decision.reason}")

    def exit(self, reason: str) -> None:
        super().exit(reason)
        self._fail(f"no answer: {reason}")

    def _fail(self, why: str) -> None:
        self.answer.fail(ConnectionError(why))

    def _done(self, answer: Latch[dp.Event | None]) -> None:
        self._give_up.cancel()
        # Close once what is written is gone (a stop must reach the head).
        self.loop.call_soon(self.close_all)


def ask(
    loop: Loop, host: str, port: int, request: Request, timeout: float = 10.0
) -> Latch[dp.Event | None]:
    """Send ``request`` to the head at ``host:port`` as an observer, on ``loop``: a latch
    with the answer (None for stop), or a `ConnectionError` within ``timeout`` seconds."""
    where = format_head(host, port)
    observer = ObserverHost(loop, request, where, timeout)
    observer.dial(dp.HEAD_LINK, host, port, timeout)
    answer = observer.answer
    reply: Latch[dp.Event | None] = Latch()

    def settle(_: object) -> None:
        error = answer.error()
        if error is not None:
            reply.fail(error)
        else:
            reply.set(answer.result())

    # Settled once the connection is closed too: a caller that ends the loop then leaves
    # nothing open on it (a TLS close waits for the head's close_notify).
    answer.add_callback(lambda _: observer.drained.add_callback(settle))
    return reply
