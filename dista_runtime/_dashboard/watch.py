"""The dashboard's view of the head: one observer connection, a snapshot a second.

`Watch` keeps a `Board` fed. It dials the head as an observer (TLS with the observer's
certificate when the cluster has TLS), asks for a snapshot (Dista's kind 44) with the
number of the last timeline record it has, hands the document and the new records to the
board, and asks again (at once while the head says more records wait). How soon follows
what a snapshot costs: the time from asking to the answer, mostly the head building it,
times `SPACING` (at least `EVERY_S`, at most `SLOWEST_S`), so that watching costs a head
about 1% of its time however large its state grows: a small cluster's 2 ms means once a
second, 60 ms for 100,000 tracked objects every six seconds (at most every 30 s: a head
tracking millions of objects pauses that long per snapshot, about 0.6 us an object). A
head it cannot reach, or that goes away, is the board's `unreachable`, and the watch dials
again every few seconds: a restarted head is watched as soon as it listens.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final, Protocol

import dista_proto as dp

from .._clock import now
from .._hosts.engine import Engine
from .._net.address import format_head
from .._net.contract import Loop
from .._tls.config import dial_failure, refusal_hint
from .board import Row

__all__ = ["EVERY_S", "RETRY_S", "Sink", "Watch"]

#: How often the board is fed at most and at least, the asking interval per second a
#: snapshot takes, and how soon a lost head is dialed again.
EVERY_S: Final = 1.0
SLOWEST_S: Final = 30.0
SPACING: Final = 100
RETRY_S: Final = 3.0
_log = logging.getLogger("dista.dashboard")


class Sink(Protocol):
    """What the watch feeds (the dashboard's `Board`)."""

    def update(self, snapshot: dict[str, Any], rows: list[Row]) -> None: ...

    def unreachable(self, why: str) -> None: ...


class Watch:
    """Feeds ``sink`` with the head at ``host:port``'s snapshots, for as long as it runs."""

    def __init__(
        self, loop: Loop, host: str, port: int, sink: Sink, every: float = EVERY_S
    ) -> None:
        self.loop = loop
        self.host = host
        self.port = port
        self.where = format_head(host, port)
        self.sink = sink
        self.every = every
        self.since = 0  # the last timeline record the board has
        self.closed = False
        self._link: _Link | None = None
        self._timer: Any = None
        self._asked = 0.0  # when the question in flight went
        self._why = ""  # why the head was last out of reach ("" while watched)

    def start(self) -> None:
        self._dial()

    def close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self._link is not None:
            self._link.close_all()

    def _dial(self) -> None:
        self._timer = None
        if self.closed:
            return
        self._link = _Link(self.loop, self)
        self._link.dial(dp.HEAD_LINK, self.host, self.port, RETRY_S * 2)

    def ask(self) -> None:
        self._timer = None
        link = self._link
        if link is not None and not self.closed:
            self._asked = time.monotonic()
            link.core.ask(dp.Snapshot(self.since), now())
            link.transmit()

    def answered(self, answer: dp.Snapshot) -> None:
        if answer.document is None:
            return
        try:
            document = json.loads(answer.document)
        except ValueError as e:  # (a head's bug: say it, keep watching)
            _log.warning("the head's snapshot is not JSON: %s", e)
            return
        self.since = answer.since
        if self._why:
            _log.info("watching the head at %s again", self.where)
            self._why = ""
        rows = [
            Row(r.object_id, r.function, r.submitted, r.dispatched, r.started, r.ended,
                str(r.address), r.failed)
            for r in dp.snapshot_rows(answer.rows)
        ]  # fmt: skip
        self.sink.update(document, rows)
        more = bool(document.get("timeline", {}).get("more"))
        took = time.monotonic() - self._asked
        wait = min(max(self.every, took * SPACING), SLOWEST_S)
        self._timer = self.loop.call_later(0 if more else wait, self.ask)

    def lost(self, why: str) -> None:
        """The link to the head failed or closed: tell the board, dial again soon."""
        self._link = None
        if self.closed:
            return
        if why != self._why:  # once per reason, not every few seconds
            _log.warning("%s; trying again every %g s", why, RETRY_S)
            self._why = why
        self.sink.unreachable(why)
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(RETRY_S, self._dial)


class _Link(Engine):
    """One observer connection of a `Watch`."""

    role_name = "dashboard"
    tls_role = "observer"
    core: dp.Observer

    def __init__(self, loop: Loop, watch: Watch) -> None:
        super().__init__(loop, dp.Observer())
        self.watch = watch
        self.route(dp.Answered, self._answered)
        self.route(dp.Refused, self._refused)
        self._why = ""

    def dialed(self, link: int, error: str) -> None:
        if error:
            why = dial_failure(error, self.tls)
            self._gone(f"cannot reach a Dista head at {self.watch.where}: {why}")
            return
        at = now()
        self.core.start(at)
        self.watch.ask()

    def lost(self, link: int) -> None:
        self.core.connection_lost(link, now())
        self._gone(
            self._why
            or f"the head at {self.watch.where} closed the connection; "
            + refusal_hint(self.tls is not None)
        )

    def exit(self, reason: str) -> None:
        super().exit(reason)
        self._gone(self._why or f"no answer: {reason}")

    def _answered(self, decision: dp.Answered) -> None:
        if isinstance(decision.answer, dp.Snapshot):
            self.watch.answered(decision.answer)

    def _refused(self, decision: dp.Refused) -> None:
        self._why = f"the head refused the dashboard: {decision.reason}"

    def _gone(self, why: str) -> None:
        if self.watch._link is self:
            self.watch.lost(why)
            self.loop.call_soon(self.close_all)
