"""A worker on any loop: the `Worker` core, its object server and its tasks' client session.

Where tasks run, and how they come back, is `dista_runtime._execution.execution`'s; this joins the
pieces in order: the object server listens, the client session (through which tasks
submit and read) is welcomed, then the worker says hello to the head; `WorkerHost.ready`
gives the object server's address once the head has the hello, and `WorkerHost.done` the
reason the worker stopped. A worker given `Patience` that finds no head at its address yet
tries again, from its client session, for as long as that lasts (`dista_runtime._hosts.wait`).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Final

import dista_proto as dp

from .._clock import now, wall_offset_ns
from .._execution.checkpoints import ENV as CHECKPOINT_ENV
from .._execution.execution import Execution
from .._net.address import advertised_host, format_head
from .._net.contract import Listener, Loop
from .._net.latch import Latch
from .._net.limits import Limits, fetch_grant_wait_ns, limits_from_env
from .._session.context import Context, clear, install
from .._session.session import Hooks
from .._tls.config import PeerIdentity, check_bind, dial_failure, tls_for
from .._values.buffer_cache import BufferCache
from .._values.registry import name_hashes, snapshot
from .._values.shared import SameHost, keep_values_shared
from .._values.trim import MemoryWatch, watch_memory
from .driver import DriverHost
from .engine import Engine
from .liveness import DRAIN_ENV, LIVENESS_ENV, drain_timeout, heartbeat_ns
from .reconnect import Reconnect
from .vitals import Vitals
from .wait import Patience, absence

__all__ = [
    "CURRENT",
    "DRAIN_ENV",
    "LIVENESS_ENV",
    "WorkerHost",
    "advertised_host",
    "drain_timeout",
    "heartbeat_ns",
    "start_worker",
]

#: The worker this process runs, if any (for introspection from inside tasks).
CURRENT: WorkerHost | None = None
#: How long the worker and its client session may take to reach the head.
_JOIN_TIMEOUT_S: Final = 10.0
#: Hosts that listen on every interface: never an address to tell fetchers.
_ANY: Final = frozenset({"0.0.0.0", "", "::"})
#: How long an exiting worker waits for its actor's thread to remove the checkpoints of
#: actors stopped for good (killed, or their driver left), before removing them itself.
_FORGET_WAIT_S: Final = 1.0
_FORGET_POLL_S: Final = 0.005


class WorkerHost(Engine):
    """A worker's links and tasks. ``ready`` gives the object server's ``(host, port)`` once
    the head has the worker's hello; ``done`` why the worker stopped."""

    role_name = "worker"
    tls_role = "worker"
    core: dp.Worker

    def __init__(self, loop: Loop, core: dp.Worker, threads: int, head: tuple[str, int]) -> None:
        super().__init__(loop, core)
        self.head = head
        self.execution = Execution(core, threads, loop, self.transmit)
        self.route(dp.RunTask, self.execution.run)
        self.route(dp.CancelTask, self.execution.cancel)
        actors = self.execution.actors  # an actor's work, in order, on its thread
        self.route(dp.StartActor, actors.handle)
        self.route(dp.CallActor, actors.handle)
        self.route(dp.CheckpointActor, actors.handle)
        self.route(dp.StopActor, actors.stop)  # `_on_exit` waits for its removals
        self.route(dp.HeadLost, self._head_lost)
        Vitals(self, core.telling.vitals)  # pid, memory, checkpoints: for people
        self.runners = self.execution.runners
        self.inline = self.execution.inline
        self.client: DriverHost | None = None
        self.listener: Listener | None = None
        self.ready: Latch[tuple[str, int]] = Latch()
        self.done: Latch[str] = Latch()
        self.exited.add_callback(self._on_exit)
        self._reconnect = Reconnect(
            self,
            head,
            self._rejoin,
            self._gave_up,
            lambda: f"rejoined with {len(self.core.store)} objects",
        )
        #: Whether tasks get a client session (to submit and read refs); made anew on rejoin.
        self.with_client = True
        self._drain_timer: Any = None
        self.memory: MemoryWatch | None = None
        #: Whether it stopped because its head could not be reached again.
        self.lost_head = False
        #: How long to keep trying a head not there yet (`wait`); None: fail at once.
        self.patience: Patience | None = None
        self._wait_timer: Any = None
        #: Whether a signal stopped it before it joined (while it waited for its head).
        self.stopped_early = False

    @property
    def hooks(self) -> Hooks:
        """What its tasks' session does around their waits: lend slots, stop inline runs."""
        return Hooks(self.runners.blocking, self.execution.awaiting, self.inline.session_used)

    def reach(self) -> None:
        """Join the head: the tasks' client session first (a task may submit work as soon
        as the head knows this worker), then the worker's own hello (`join_head`). Either,
        finding no head there yet, tries this again later while `patience` lasts."""
        self._wait_timer = None
        if self.exited.done():
            return
        if self.with_client:
            self.connect_client(self.join_head)
        else:
            self.join_head()

    def join_head(self) -> None:
        """Say hello to the head (`dialed` goes on)."""
        self.dial(dp.HEAD_LINK, *self.head, _JOIN_TIMEOUT_S)

    def _wait(self, error: str) -> bool:
        """No head answered (a dial failed with ``error``): whether to wait for one (`reach`
        again later, or give up once `patience` is spent). False: fail as before."""
        patience = self.patience
        if patience is None or self.ready.done() or not absence(error):
            return False
        delay = patience.next(error)
        if delay is None:
            self.exit(patience.gave_up())
        else:
            self._wait_timer = self.loop.call_later(delay, self.reach)
        return True

    def dialed(self, link: int, error: str) -> None:
        if link != dp.HEAD_LINK:
            super().dialed(link, error)
        elif self._reconnect.active:
            self._reconnect.dialed(error)
        elif error:
            if self._wait(error):  # its client got in, but the head went since
                if self.client is not None and not self.exited.done():
                    self.client.close()
                    self.client = None
                    self._reconnect.joined = False
                return
            why = dial_failure(error, self.tls)
            self.exit(f"cannot reach the head at {format_head(*self.head)}: {why}")
        else:
            self._reconnect.connected()  # a head that will not take us closes it at once
            if self.patience is not None:
                self.patience.reached()
            self.core.start(now())
            self.transmit()
            address = self.core.address
            self.ready.set((address.host, address.port))

    def _head_lost(self, decision: dp.HeadLost) -> None:
        if self.exited.done():
            return  # it is leaving (a drain that timed out): its own close, not a lost head
        if self.client is not None:
            self.client.close()  # its tasks were interrupted; a new one comes on rejoin
            self.client = None
        if self.core.draining and not self.core.store:
            self.exit("drained (the head was lost, and nothing is left to move)")
        else:
            self._reconnect.lost(decision.reason)  # meanwhile our objects are served

    def _rejoin(self) -> None:
        """The head is back (or a new one listens where it was): rejoin with holding."""
        self.core.start(now())
        self.transmit()
        if self.with_client:
            self.connect_client(lambda: None)

    def connect_client(self, then: Callable[[], None]) -> None:
        """Give tasks a client session of their own, then call ``then`` (joined or not)."""
        names, registry = snapshot()
        session = DriverHost(self.loop, registry, dp.Role.CLIENT, self.hooks, name_hashes(names))

        def welcomed(latch: Latch[None]) -> None:
            if self.exited.done():  # stopped meanwhile (a signal while it waited)
                session.close()
                return
            if latch.failed():
                session.close()  # tasks get no session; the worker itself may still serve
                if self._wait(session.unreachable):
                    return  # no head there yet: all of it again later
            else:
                # Its hello needs what a worker's does: the head takes this process, and a
                # loss from now on is a lost head, not a refusal (`_reconnect`).
                self._reconnect.joined = True
                self.client = session
                clear()
                install(Context(session.session, names, self.head))
            then()

        session.join(*self.head, _JOIN_TIMEOUT_S).add_callback(welcomed)

    def drain(self) -> None:
        """SIGTERM (on the loop): stop taking work, let the head move what we hold, and
        leave when it says stop; leave at once if the head is away, and after
        ``DISTA_DRAIN_TIMEOUT`` at the latest."""
        if self.exited.done():
            return
        if not self.ready.done():  # not joined (waiting for its head): nothing to hand over
            self.stopped_early = True
            self.exit(f"stopped by a signal before joining the head at {format_head(*self.head)}")
            return
        if self._reconnect.active or self.core.draining:
            self.exit("stopped by a signal")  # a second signal, or no head to drain with
            return
        timeout = drain_timeout()
        self.log.warning(
            "dista worker: draining (%d objects to hand over); leaving when the head says "
            "so, or in %g s (%s)",
            len(self.core.store),
            timeout,
            DRAIN_ENV,
        )
        self.core.drain(now())
        self.transmit()
        self._drain_timer = self.loop.call_later(timeout, self._drain_late, timeout)

    def _drain_late(self, timeout: float) -> None:
        left = len(self.core.store)
        why = (
            f"drain timed out after {timeout:g} s ({DRAIN_ENV}) with {left} objects not "
            "adopted (the head's status says why: no other worker?)"
        )
        self.log.warning("dista worker: leaving: %s", why)  # on purpose, and said once
        self.exit(why)

    def _gave_up(self, why: str) -> None:
        """The head could not be reached again in time (`_reconnect`)."""
        self.lost_head = True
        self.exit(why)

    def _on_exit(self, exited: Latch[str]) -> None:
        self._reconnect.cancel()
        if self._wait_timer is not None:
            self._wait_timer.cancel()
            self._wait_timer = None
        if self._drain_timer is not None:
            self._drain_timer.cancel()
        if self.listener is not None:
            self.listener.close()
        if self.client is not None:
            self.client.close()
        self.close_all()
        reason = exited.result()
        joined = self.ready.done()
        if not joined:  # it never joined: both say why
            self.ready.fail(ConnectionError(reason))

        def finish() -> None:
            if joined:
                self.done.set(reason)
            else:
                self.done.fail(ConnectionError(reason))

        def drained(_: object) -> None:
            # `done` ends the loop: once no connection is left to it (`Engine.close_all`),
            # and no checkpoint of an actor stopped for good is left behind: the local
            # cluster's head forwards its drivers' actor kills just before it stops us.
            if self.client is not None and not self.client.drained.done():
                self.client.drained.add_callback(drained)
            else:
                self._forget_actors(time.monotonic() + _FORGET_WAIT_S, finish)

        self.drained.add_callback(drained)

    def _forget_actors(self, deadline: float, then: Callable[[], None]) -> None:
        actors = self.execution.actors
        if actors.forgetting() and time.monotonic() < deadline:
            self.loop.call_later(_FORGET_POLL_S, self._forget_actors, deadline, then)
            return
        actors.forget_now()  # what the actor's thread did not get to (a call still runs)
        then()

    def greeted(self, link: int) -> bool:
        return self.core.greeted(link)  # a fetcher's greeting: a whole frame

    def authenticated(self, link: int, roles: frozenset[str], identity: PeerIdentity) -> bool:
        return self.core.authenticated(link, roles)

    def attached(self, link: int, host: str) -> None:
        # The head's host (a grant to loopback means the head's machine), and each
        # fetcher's: the object server serves only what the head granted its host.
        if link == dp.HEAD_LINK or link not in self._dialed:
            self.core.peer(link, host)

    def opened(self, link: int) -> None:
        self.core.connected(link, now())
        self.transmit()


def accept_by_value_env() -> bool:
    """``DISTA_ACCEPT_BY_VALUE=1``: this worker runs by-value code of any registry."""
    value = os.environ.get("DISTA_ACCEPT_BY_VALUE", "").strip().lower()
    return value in ("1", "true", "yes", "on")


def start_worker(
    loop: Loop,
    head_host: str,
    head_port: int,
    *,
    host: str | None = None,
    threads: int = 1,
    client: bool = True,
    limits: Limits | None = None,
    accept_by_value: bool | None = None,
    patience: Patience | None = None,
) -> WorkerHost:
    """Serve the head at ``head_host:head_port`` on ``loop`` until it stops us.

    The registry is whatever tasks this process has imported by now. ``host`` is where the
    object server listens and what the head tells fetchers (default: the interface that
    reaches the head; loopback for a head on loopback). ``client`` gives tasks a session of
    their own, so that they can submit tasks and read refs. ``limits`` bound the
    connections its object server takes (default: the ``DISTA_*`` variables, `_limits`).
    ``accept_by_value``: also run by-value code (a script's functions and actor classes)
    of drivers of any registry, not only of drivers importing the same modules (default:
    ``DISTA_ACCEPT_BY_VALUE=1``). ``patience``: how long to keep trying a head not there
    yet (`dista_runtime._hosts.wait`; default: fail at once).
    """
    bind = host or advertised_host(head_host)
    warning = check_bind("dista worker", bind, tls_for("worker"))  # ValueError: refused
    if warning:
        logging.getLogger("dista.worker").warning("%s", warning)
    names, registry = snapshot()
    sock = socket.create_server((bind, 0))
    # Listening on every interface, it tells fetchers the one that reaches the head.
    advertise = advertised_host(head_host) if bind in _ANY else bind
    address = dp.Address(advertise, sock.getsockname()[1])
    buffers = BufferCache(loop)  # large receives land in maps faulted in already
    # Large values in memory files that fetchers on this host map (`_values.shared`).
    same_host = SameHost.create()
    keep_values_shared(same_host is not None)
    core = dp.Worker(
        registry_hash=registry,
        address=address,
        allocate=buffers.allocate,
        heartbeat_ns=heartbeat_ns(),
        check_fetches=True,  # fetches only by the head's grant, or from a TLS member
        accept_by_value=accept_by_value_env() if accept_by_value is None else accept_by_value,
        # It says so in its hello: only such a worker is chosen to restore an actor.
        checkpoints=bool(os.environ.get(CHECKPOINT_ENV, "").strip()),
        fetch_wait_ns=fetch_grant_wait_ns(),
        wall_offset_ns=wall_offset_ns(),  # its spans' stamps, for people
        mapping=same_host,
        task_names=name_hashes(names),
    )
    worker = WorkerHost(loop, core, threads, (head_host, head_port))
    worker.exited.add_callback(buffers.close)
    if same_host is not None:
        worker.same_host = same_host
        worker.exited.add_callback(same_host.close)
    worker.limit(limits if limits is not None else limits_from_env())
    # The heap back after fetchers drop what their transports had queued (`_trim`).
    worker.memory = watch_memory(loop, worker.exited)
    try:
        worker.listener = loop.listen(worker, bind, address.port, sock, worker.secure(False))
    except BaseException:
        sock.close()
        raise
    global CURRENT
    CURRENT = worker
    worker.with_client = client
    worker.patience = patience
    worker.reach()
    return worker
