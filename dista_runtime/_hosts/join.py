"""Joining a cluster, on any binding: `dista.init`'s two ways, and the `Cluster` they give.

Both run Dista's loop in the background (`Background`: a binding's loop thread, or for
gevent the hub the caller's greenlets already share) and hand back a `Context` whose
``close`` ends what they started:

- `connect_blocking`: a driver of a head elsewhere;
- `connect_local`: a local cluster's head on a listening socket, and its driver linked to
  it in memory (`dista_runtime._net.memlink`), once the local workers have joined.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol, Self

import dista_proto as dp

from .._errors import DistaError
from .._net.address import format_head, parse_head
from .._net.contract import Background, Loop, Timer
from .._net.latch import Latch
from .._net.memlink import memory_link
from .._net.streams import Link
from .._session import context as _context
from .._session.context import Context, install
from .._values.registry import name_hashes, snapshot
from .driver import DriverHost
from .engine import CLOSE_GRACE_S, Engine
from .head import HeadHost, start_head

if TYPE_CHECKING:
    from .._local.local_cluster import LocalCluster

__all__ = [
    "Background",
    "Cluster",
    "LocalWorkers",
    "begin",
    "connect_blocking",
    "connect_local",
    "joined",
]

#: How long a closing local head may take to stop its workers and flush.
_HEAD_CLOSE_S: Final = 5.0
_DRIVER_CLOSE_S: Final = 5.0
_JOIN_POLL_S: Final = 0.002


class Cluster:
    """What `init` returns: the connection (and the local cluster, if it started one)."""

    def __init__(
        self,
        context: _context.Context,
        local: LocalCluster | None,
        background: Background | None = None,
    ) -> None:
        self.context = context
        self.local = local
        #: The loop serving this process's blocking calls, when `init` started one.
        self.background = background
        #: The dashboard's URL, with ``init(dashboard=True)`` (else None).
        self.dashboard_url: str | None = None

    @property
    def address(self) -> str:
        return format_head(*self.context.address)

    def pids(self) -> list[int]:
        """The local workers' process IDs (the head runs in this process; empty when joined
        to a cluster)."""
        return self.local.pids() if self.local is not None else []

    def shutdown(self) -> None:
        if self.local is not None:
            # First: the head stops its workers as the driver leaves; none may be replaced.
            self.local.begin_close()
        for close in self.context.close:
            close()
        self.context.close.clear()
        self.context.session.close("shut down")
        _context.clear(self.context)
        if self.local is not None:
            self.local.close()
            self.local = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        kind = f"local, {len(self.pids())} workers" if self.local else "remote"
        return f"<dista Cluster {self.address} ({kind})>"


class LocalWorkers(Protocol):
    """What `connect_local` needs of the worker processes it waits for (`LocalCluster`)."""

    #: How many workers to wait for.
    expected: int

    def why_lost(self, pid: int) -> str | None:
        """How process ``pid`` ended ("worker pid 4242 died: SIGSEGV"); None while it runs."""
        ...

    def failed(self) -> str:
        """Why the workers cannot start (they keep dying on start), or ''."""
        ...

    def head_exited(self) -> None:
        """The head stopped: no worker should be replaced from now on."""
        ...

    def grow_to(self, workers: int) -> None:
        """Run at least ``workers`` worker processes (any thread)."""
        ...


def _on_loop(background: Background, call: Callable[[], object], timeout: float) -> None:
    """Run ``call`` on the background loop and wait for it (and one more turn)."""
    done: Latch[None] = Latch()

    def run() -> None:
        try:
            call()
        finally:
            background.loop.call_soon(done.set, None)

    try:
        background.loop.call_soon_threadsafe(run)
        done.wait(timeout)
    except (RuntimeError, TimeoutError):
        pass  # the loop is gone or stuck: stopping it is all that is left


def _drained(engine: Engine) -> None:
    """Wait until ``engine``'s connections are closed (`Engine.close_all`): each is
    aborted after `CLOSE_GRACE_S`, so this is bounded unless the loop is stuck."""
    with contextlib.suppress(TimeoutError):
        engine.drained.wait(CLOSE_GRACE_S + 1.0)


def connect_blocking(
    background: Background, host: str, port: int, timeout: float = 10.0
) -> Context:
    """A driver of the head at ``host:port`` on ``background``; `Context.close` ends both."""
    names, registry = snapshot()
    joined: Latch[DriverHost] = Latch()

    def start() -> None:
        driver = DriverHost(background.loop, registry, dp.Role.DRIVER, None, name_hashes(names))
        driver.join(host, port, timeout).add_callback(lambda w: _then(w, joined, driver))

    try:
        background.loop.call_soon_threadsafe(start)
        driver = joined.wait()
    except BaseException:
        background.stop()
        raise
    context = Context(driver.session, names, (host, port))

    def close() -> None:
        _on_loop(background, driver.close, _DRIVER_CLOSE_S)
        _drained(driver)
        background.stop()

    context.close.append(close)
    return context


def connect_local(
    background: Background,
    listener: socket.socket,
    address: tuple[str, int],
    timeout: float = 10.0,
    workers: LocalWorkers | None = None,
) -> Context:
    """Serve a local cluster's head on ``listener`` and join it as the driver, both on
    ``background``; `Context.close` stops the head (it stops its workers) and the loop.

    With ``workers``, return once ``workers.expected`` workers have joined the head (within
    ``timeout`` in all), or raise `DistaError` as soon as they cannot start; the head asks
    ``workers.why_lost`` how a lost worker's process ended.
    """
    names, registry = snapshot()
    loop = background.loop
    deadline = time.monotonic() + timeout
    started: Latch[tuple[HeadHost, DriverHost]] = Latch()
    heads: list[HeadHost] = []  # once the head serves the listener, it closes it

    def start() -> None:
        try:
            why_lost = workers.why_lost if workers is not None else None
            head = start_head(loop, sock=listener, local=True, why_lost=why_lost)
        except (OSError, ValueError) as e:  # the listener cannot be served; a bad setting
            started.fail(e)
            return
        heads.append(head)
        if workers is not None:
            head.exited.add_callback(lambda _: workers.head_exited())
            # Each actor takes a worker: start one more for it, as Ray starts a process
            # per actor, so that `init(workers=n)` keeps n workers for tasks.
            head.on_actors = lambda alive: workers.grow_to(workers.expected + alive)
        driver = DriverHost(loop, registry, dp.Role.DRIVER, None, name_hashes(names))
        memory_link(loop.call_soon, Link(driver, dp.HEAD_LINK), Link(head, head.accept()))
        timer = loop.call_later(timeout, too_late, driver)
        driver.start().add_callback(lambda w: welcomed(w, head, driver, timer))

    def too_late(driver: DriverHost) -> None:
        if not driver.welcomed.done():
            why = f"the local head did not welcome its driver in {timeout} s"
            driver.welcomed.fail(ConnectionError(why))

    def welcomed(latch: Latch[None], head: HeadHost, driver: DriverHost, timer: Timer) -> None:
        error = latch.error()
        if error is not None:
            give_up(head, driver, error)
        else:
            joined(head, driver, timer)

    def joined(head: HeadHost, driver: DriverHost, timer: Timer) -> None:
        """Until the head counts the workers; `DistaError` if they cannot start in time."""
        if workers is None or head.head.stats().workers >= workers.expected:
            timer.cancel()
            started.set((head, driver))
            return
        reason = workers.failed()
        if not reason and time.monotonic() >= deadline:
            reason = (
                f"only {head.head.stats().workers} of the local cluster's "
                f"{workers.expected} workers joined its head in time (init's timeout)"
            )
        if reason:
            timer.cancel()
            give_up(head, driver, DistaError(reason))
            return
        loop.call_later(_JOIN_POLL_S, joined, head, driver, timer)

    def give_up(head: HeadHost, driver: DriverHost, error: BaseException) -> None:
        head.stop("the driver could not connect")
        driver.close_all()
        head.close_all()
        started.fail(error)

    try:
        loop.call_soon_threadsafe(start)
        head, driver = started.wait()
    except BaseException:
        if not heads:
            listener.close()
        background.stop()
        raise
    context = Context(driver.session, names, address)

    def close() -> None:
        # The head's last driver leaves: it stops its workers, then exits and flushes.
        _on_loop(background, driver.close, _DRIVER_CLOSE_S)
        try:
            head.closed.wait(_HEAD_CLOSE_S)
        except TimeoutError:
            _on_loop(background, lambda: force(head), _DRIVER_CLOSE_S)
        _drained(driver)
        background.stop()

    def force(head: HeadHost) -> None:
        head.stop("the local cluster shut down")
        head.close_all()

    context.close.append(close)
    return context


def _then(welcome: Latch[None], joined: Latch[DriverHost], driver: DriverHost) -> None:
    error = welcome.error()
    if error is not None:
        joined.fail(error)
    else:
        joined.set(driver)


def begin(
    loop: Loop, address: str | None, timeout: float, cancel_remote: bool = False
) -> tuple[DriverHost, tuple[str, int]]:
    """A driver on ``loop`` joining the head at ``address`` (``HOST:PORT`` or
    ``unix:PATH``; None: ``DISTA_ADDRESS``); await its ``welcomed``, then `joined`.

    ``cancel_remote``: a cancelled ``await ref`` cancels the ref's task too."""
    address = address or os.environ.get("DISTA_ADDRESS")
    if not address:
        raise DistaError("connect() needs the head's address (HOST:PORT) or DISTA_ADDRESS")
    host, port = parse_head(address)  # AddressError: a DistaError and a ValueError
    names, registry = snapshot()
    driver = DriverHost(loop, registry, dp.Role.DRIVER, None, name_hashes(names))
    driver.session.cancel_remote = cancel_remote
    driver.join(host, port, timeout)
    return driver, (host, port)


def joined(driver: DriverHost, address: tuple[str, int]) -> Cluster:
    """The cluster ``driver`` (welcomed) is this process's connection to, installed."""
    names, _ = snapshot()
    context = Context(driver.session, names, address)

    def close() -> None:
        if driver.in_io_thread():
            driver.close()
        else:
            try:
                driver.loop.call_soon_threadsafe(driver.close)
            except RuntimeError:
                pass  # that loop is closed: the connection went with it

    context.close.append(close)
    install(context)
    return Cluster(context, None)
