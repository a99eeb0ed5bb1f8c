"""A driver (or a task's client) on any loop: a `Session` whose head link is an engine's.

User threads (and coroutines on other loops) reach the cluster through ``session``; the
host runs the `Driver` core on its loop, through the session (its engine's core: the
driver's core behind the session's lock), and flushes what they submit once per burst.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, Final

import dista_proto as dp

from .._clock import now
from .._net.address import format_head
from .._net.contract import Loop
from .._net.latch import Latch
from .._net.limits import keepalive_interval
from .._session.budget import inflight_budget
from .._session.driver_actors import keep_bytes
from .._session.session import Hooks, Session
from .._tls.config import dial_failure, refusal_hint, tls_for
from .._values.buffer_cache import BufferCache
from .._values.shared import SameHost
from .engine import Engine
from .reconnect import Reconnect
from .vitals import Vitals

__all__ = ["DriverHost"]

#: How long a peer that took our connection may stay silent after our hello before we say
#: it is not a Dista head: a head welcomes at once (an HTTP server, say, waits for more).
ANSWER_S: Final = 3.0


class DriverHost(Engine):
    """Runs a `Driver` core on ``loop``. ``welcomed`` is settled once the head welcomed it
    (or failed with a `ConnectionError` saying why not)."""

    role_name = "driver"
    tls_role = "driver"
    core: Session

    def __init__(
        self,
        loop: Loop,
        registry_hash: int,
        role: dp.Role,
        hooks: Hooks | None = None,
        task_names: Iterable[int] | None = None,
    ) -> None:
        #: Large receives land in maps faulted in already when one is free (`_buffer_cache`).
        self.buffers = BufferCache(loop)
        # Objects on this host come mapped, not copied (`_values.shared`).
        same_host = SameHost.create()
        core = dp.Driver(
            registry_hash=registry_hash,
            role=role,
            allocate=self.buffers.allocate,
            mapping=same_host,
            keep_bytes=keep_bytes(),
            keepalive_ns=int(keepalive_interval() * 1e9),
            task_names=task_names,
        )
        self.session = Session(core, self, hooks)
        self.session.budget.limit = inflight_budget()
        super().__init__(loop, self.session)
        self.route(dp.HeadLost, self._head_lost)
        if role == dp.Role.CLIENT:  # a task's client shows its worker's certificate
            self.use_tls(tls_for("worker"))
        self.welcomed: Latch[None] = Latch()
        self.exited.add_callback(self.buffers.close)
        if same_host is not None:
            self.same_host = same_host
            self.exited.add_callback(same_host.close)
        self._flush_scheduled = False
        self._io_thread = threading.get_ident()
        self._where = ""
        self._join_timer: Any = None
        self._answer_timer: Any = None  # until the head's first bytes (`ANSWER_S`)
        self._answer_s = ANSWER_S
        self._not_dista = ""  # what the first head's bytes broke, if they were not Dista's
        #: Why its first dial of the head failed, as the loop said it ('' if it did not):
        #: a worker tells a head not there yet from one that will not take it by it.
        self.unreachable = ""
        self._reconnect: Reconnect | None = None
        if role == dp.Role.DRIVER:  # (a task's client: its worker tells for the process)
            Vitals(self, self.session.vitals)

    def join(self, host: str, port: int, timeout: float) -> Latch[None]:
        """Connect to the head at ``host:port`` and say hello; `welcomed` tells the end.
        A driver that loses that head later dials it again and resumes (`_reconnect`)."""
        self._where = format_head(host, port)
        if self.session.core.role == dp.Role.DRIVER:
            try:
                self._reconnect = Reconnect(
                    self, (host, port), self._resume, self._give_up, self._resuming
                )
            except ValueError as e:  # a bad DISTA_RECONNECT_TIMEOUT: say so from init
                self._fail(str(e))
                return self.welcomed
        self._join_timer = self.loop.call_later(timeout, self._too_late, timeout)
        self._answer_s = min(ANSWER_S, timeout)
        self.dial(dp.HEAD_LINK, host, port, timeout)
        return self.welcomed

    def start(self) -> Latch[None]:
        """Say hello on a head link already attached (an in-memory one)."""
        self.session.start()
        self.transmit()
        return self.welcomed

    def dialed(self, link: int, error: str) -> None:
        if link != dp.HEAD_LINK:
            super().dialed(link, error)
        elif self._reconnect is not None and self._reconnect.active:
            self._reconnect.dialed(error)
        elif error:
            self.unreachable = error
            why = dial_failure(error, self.tls)
            self._fail(f"cannot reach a Dista head at {self._where}: {why}")
        else:
            self.session.start()
            self.transmit()
            if not self.welcomed.done():
                self._answer_timer = self.loop.call_later(self._answer_s, self._silent)

    def _silent(self) -> None:
        """Connected, our hello sent, and not a byte back: not a Dista head."""
        self._answer_timer = None
        if not self.welcomed.done():
            self._fail(
                f"{self._where} is not a Dista head: it took the connection but did not "
                f"answer our hello in {self._answer_s:g} s"
            )
            self.close_all()

    def refused(self, link: int, transport: Any, reason: str) -> None:
        if link == dp.HEAD_LINK and not self.welcomed.done():
            # Its first bytes are not Dista frames: said once, by `lost`'s failure.
            self._not_dista = reason.removeprefix("protocol error: ")
            return
        super().refused(link, transport, reason)

    def _too_late(self, timeout: float) -> None:
        self._join_timer = None
        if not self.welcomed.done():
            self._fail(f"the head at {self._where} did not welcome us in {timeout} s")
            self.close_all()

    def _head_lost(self, decision: dp.HeadLost) -> None:
        if self._reconnect is not None and self.welcomed.done() and not self.session.closed:
            self._reconnect.lost(decision.reason)
        else:  # an in-memory head, or never welcomed: nothing to resume with
            self.session.close(decision.reason)
            self.exited.set(decision.reason)

    def _resume(self) -> None:
        """The head is back (or a new one listens where it was): resume under our number."""
        self.session.start()
        self.transmit()

    def _resuming(self) -> str:
        core = self.session.core
        return f"resumed as driver {core.number} ({core.needed} objects)"

    def _give_up(self, why: str) -> None:
        self.log.warning("dista driver: %s", why)
        self.session.close(why)
        self.exited.set(why)

    def _fail(self, why: str) -> None:
        if self._join_timer is not None:
            self._join_timer.cancel()
            self._join_timer = None
        if self._answer_timer is not None:
            self._answer_timer.cancel()
            self._answer_timer = None
        self.welcomed.fail(ConnectionError(why))

    # -- SessionIO ---------------------------------------------------------------------------

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._flush)
            except RuntimeError:
                pass  # the loop is closed: the session is over anyway

    def in_io_thread(self) -> bool:
        return threading.get_ident() == self._io_thread

    def _flush(self) -> None:
        self._flush_scheduled = False
        self.transmit()  # the session's decisions bring its queued releases first

    # -- Engine ------------------------------------------------------------------------------

    def on_updated(self, link: int, nbytes: int) -> None:
        if self._answer_timer is not None and link == dp.HEAD_LINK:
            self._answer_timer.cancel()  # it answers: whether it is a head, its bytes say
            self._answer_timer = None
        super().on_updated(link, nbytes)
        if not self.welcomed.done() and self.session.welcomed.is_set() and not self.session.closed:
            if self._join_timer is not None:
                self._join_timer.cancel()
                self._join_timer = None
            self.welcomed.set(None)

    def lost(self, link: int) -> None:
        super().lost(link)
        if self.session.closed:  # the head connection went
            why = self.session.closed
            if link == dp.HEAD_LINK and self._not_dista and not self.welcomed.done():
                why = f"{self._where} is not a Dista head: what it sent is not Dista's "
                why += f"protocol ({self._not_dista})"
            elif link == dp.HEAD_LINK and not self.welcomed.done() and "refused" not in why:
                why = f"the head at {self._where} closed the connection before welcoming us"
                why += self._tls_hint
            self._fail(why)
            self.exited.set(self.session.closed)

    @property
    def _tls_hint(self) -> str:
        if self.handshakes is not None and self.handshakes.head_failure:
            return f" (TLS: {dial_failure(self.handshakes.head_failure, self.tls)})"
        return f"; {refusal_hint(self.tls is not None)}"

    def opened(self, link: int) -> None:
        self.session.connected(link, now())
        self.transmit()

    def close(self) -> None:
        """Leave the cluster (on the loop): every wait on this session ends."""
        if self._reconnect is not None:
            self._reconnect.cancel()
        self.session.leave()
        self.transmit()  # written before the close: a transport flushes first
        self.session.close("the driver shut down")
        self.close_all()
        self.exited.set("the driver shut down")
