"""The head on any loop: a listener whose every connection is a link of the `Head` core.

Links read into place: small frames into each connection's reused buffer, a frame of 1 MiB
or more (a large argument) straight into one buffer from `allocate`, which the head then
forwards to a worker as it lies.

A peer's requests are answered in passes bounded by the core (`dista_proto._head_answers`):
when the core holds a peer's frames until its answers are written (`Head.holding`), the
host stops reading that peer, and tells the core (`Head.writable`) once the stream has
taken them: at its `resume_writing`, or on the loop's next turn if they went out at once
(so other peers' input is handled between two passes of one peer's).

The core's pulled timer (`next_deadline` / `on_timer`, aioquic's shape) is kept armed as
one loop timer by the engine (`Engine.transmit`). A head that supervises its workers' processes (a local cluster's) passes
``why_lost``: it learns each Unix-socket link's peer PID (``SO_PEERCRED``) and, when a
worker's link drops, asks ``why_lost(pid)`` how that process ended, for up to
`FATE_WAIT_S` (the end of the connection can arrive before the process is reaped), so that
the errors of the tasks the worker took along say "worker pid 4242 died: SIGSEGV" rather
than "connection lost".
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import struct
import time
from collections.abc import Callable
from typing import Final

import dista_proto as dp

from .._clock import now, wall_offset_ns
from .._net.address import socket_address
from .._net.contract import Listener, Loop, Stream
from .._net.latch import Latch
from .._net.limits import Limits, inline_cap, limits_from_env, partial_cap
from .._tls.config import PeerIdentity, check_bind, resume_key, tls_for
from .._values.memory import allocate
from .._values.registry import ACTOR_BY_VALUE_ID, BY_VALUE_ID, PUT_ID
from .._values.trim import MemoryWatch, watch_memory
from .engine import Engine
from .liveness import liveness_s

__all__ = ["FATE_WAIT_S", "HeadHost", "peer_pid", "start_head"]

#: How long a lost worker link waits for its process's fate before it is given up as lost.
FATE_WAIT_S: Final = 0.2
_FATE_POLL_S: Final = 0.002
#: How long a force-stopped worker may take to exit before the head SIGKILLs it.
FORCE_GRACE_S: Final = 2.0
#: The start of the reason the head core closes a force-stopped worker with.
_FORCED: Final = "stopped to force-"

#: How long a stopping head lets its stop and error frames flush before closing links.
_FLUSH_S: Final = 1.0
_FLUSH_POLL_S: Final = 0.01


def peer_pid(transport: Stream) -> int | None:
    """The PID of the process at the other end of a Unix-socket ``transport`` (Linux)."""
    sock = transport.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None or sock.family != getattr(socket, "AF_UNIX", None):
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    pid: int = struct.unpack("3i", raw)[0]
    return pid or None


class HeadHost(Engine):
    """The head's links. ``closed`` is settled with the head's exit reason once it has
    stopped listening, its last frames are flushed and its connections are closed."""

    role_name = "head"
    tls_role = "head"
    core: dp.Head

    def __init__(
        self, loop: Loop, head: dp.Head, why_lost: Callable[[int], str | None] | None = None
    ) -> None:
        super().__init__(loop, head)
        self.head = head
        self.why_lost = why_lost
        self.listener: Listener | None = None
        self.closed: Latch[str] = Latch()
        self._pids: dict[int, int] = {}  # link -> its peer's PID, when why_lost is given
        self._holding: set[int] = set()  # links not read while the core holds their frames
        self._soon: set[int] = set()  # links whose next pass is asked for the next turn
        self._told_to_stop: set[int] = set()  # workers' links left for them to close
        #: Told how many actors are alive whenever that grows (a local cluster starts a
        #: worker for each, so that actors never take the workers tasks run on).
        self.on_actors: Callable[[int], object] | None = None
        self._actors_seen = 0
        #: Gives the heap back after a burst (`_trim`), once `start_head` starts it.
        self.memory: MemoryWatch | None = None
        self.exited.add_callback(self._on_exit)

    @property
    def address(self) -> tuple[str, int]:
        assert self.listener is not None
        return self.listener.address

    def greeted(self, link: int) -> bool:
        return self.head.greeted(link)

    def authenticated(self, link: int, roles: frozenset[str], identity: PeerIdentity) -> bool:
        return self.head.authenticated(link, roles, identity.digest, identity.subject)

    def attached(self, link: int, host: str) -> None:
        self.head.peer(link, host)  # fetch grants to this peer name its host

    def attach(self, link: int, transport: Stream) -> None:
        super().attach(link, transport)
        if self.why_lost is not None and link in self.transports:
            pid = peer_pid(transport)
            if pid is not None:
                self._pids[link] = pid

    def on_updated(self, link: int, nbytes: int) -> None:
        super().on_updated(link, nbytes)
        self._check_held(link)
        alive = self.head.actors_alive
        if alive != self._actors_seen:
            grew = alive > self._actors_seen
            self._actors_seen = alive
            if grew and self.on_actors is not None:
                self.on_actors(alive)

    def resume_writing(self, link: int) -> None:
        super().resume_writing(link)
        if self.head.holding(link):
            self._answer_held(link)

    def _check_held(self, link: int) -> None:
        """Stop reading ``link`` while the core holds its frames, read it again after."""
        transport = self.transports.get(link)
        if transport is None or transport.is_closing():
            return
        if not self.head.holding(link):
            if link in self._holding:
                self._holding.discard(link)
                if not self.blocked(link):
                    transport.resume_reading()
            return
        self._holding.add(link)
        transport.pause_reading()  # again: the engine may have resumed it for its drain
        if link not in self.paused and link not in self._soon:
            # Its answers went to the stream at once: the next pass on the next turn.
            self._soon.add(link)
            self.loop.call_soon(self._answer_held, link)

    def _answer_held(self, link: int) -> None:
        self._soon.discard(link)
        if link in self.paused or link not in self.transports:
            return  # `resume_writing` comes once its stream drains; or it is gone
        self.head.writable(link, now())
        self.transmit(link)
        self._check_held(link)

    def lost(self, link: int) -> None:
        self._told_to_stop.discard(link)
        self._holding.discard(link)
        self._soon.discard(link)
        pid = self._pids.pop(link, None)
        head = self.head
        if pid is not None and not head.stopping and head.worker_address(link) is not None:
            self._await_fate(link, pid, time.monotonic() + FATE_WAIT_S)
        else:
            super().lost(link)

    def reading_paused(self, link: int, paused: bool) -> None:
        if paused:
            self.core.watch.paused(link, now())
        else:
            self.core.watch.resumed(link, now())

    def closing(self, link: int, reason: str) -> None:
        if self.memory is not None:
            # A link the core closes (a refused hello, an idle peer) leaves its transport
            # in cycles: a TLS one holds 256 KiB, and an idle head allocates too little
            # for the collector to run by itself (2,000 refused observers kept 460 MiB).
            self.memory.collect_soon()
        pid = self._pids.get(link)
        if pid is not None and reason.startswith(_FORCED):
            # A force-cancel or force-kill: the task or method may hold the GIL in C code,
            # and then its process cannot even read the stop. One this head can name (a
            # process on this machine) is SIGKILLed if it is still there after a grace.
            self.loop.call_later(FORCE_GRACE_S, self._kill_if_alive, pid)

    def _kill_if_alive(self, pid: int) -> None:
        if self.why_lost is not None and self.why_lost(pid) is None:  # it still runs
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _close(self, d: dp.Close) -> None:
        link = d.link
        if self.head.stopping and self.head.worker_address(link) is not None:
            # A worker told to stop closes its end once it has read the stop. Closing ours
            # first would fail the write of a result it has under way before it reads the
            # stop, and it would take that for a lost head and try to reconnect (Ctrl-C of
            # a busy local cluster: "lost the head", then killed after the close grace).
            # Left open, bounded by `_flush`'s deadline.
            self.closing(link, d.reason)
            if link in self.transports:
                self._told_to_stop.add(link)
            return
        super()._close(d)

    def stop(self, why: str) -> None:
        """Stop the head and its workers (a signal, a closing local cluster); on the loop."""
        self.head.stop(why, now())
        self.transmit()

    def leave(self, why: str) -> None:
        """Exit without stopping the cluster: no stop to anyone, every connection closed,
        as a crash would leave them (`dista head --on-sigterm restart`: an orchestrator
        moving the head's pod). Drivers and workers reconnect to the next head on this
        address and rebuild it; whatever was in flight is retried there."""
        if self.listener is not None:
            self.listener.close()
        self.close_all()
        self.drained.add_callback(lambda _: self.closed.set(why))

    def _await_fate(self, link: int, pid: int, deadline: float) -> None:
        """Lose ``link`` once ``why_lost`` knows how its process ended, or at ``deadline``."""
        assert self.why_lost is not None
        why = self.why_lost(pid)
        if why is None and time.monotonic() < deadline and not self.head.stopping:
            self.loop.call_later(_FATE_POLL_S, self._await_fate, link, pid, deadline)
            return
        self.head.connection_lost(link, now(), why)
        self.transmit()

    def _on_exit(self, exited: Latch[str]) -> None:
        if self.listener is not None:
            self.listener.close()
        self._flush(time.monotonic() + _FLUSH_S)

    def _flush(self, deadline: float) -> None:
        """Let the stop and error frames go before the connections drop, and the workers
        told to stop close their ends first."""
        if time.monotonic() < deadline and (
            self._told_to_stop or any(t.get_write_buffer_size() for t in self.transports.values())
        ):
            self.loop.call_later(_FLUSH_POLL_S, self._flush, deadline)
            return
        self.close_all()
        self.drained.add_callback(lambda _: self.closed.set(self.exited.result()))


def start_head(
    loop: Loop,
    host: str = "127.0.0.1",
    port: int = 7420,
    *,
    sock: socket.socket | None = None,
    local: bool = False,
    worker_slots: int = dp.WORKER_SLOTS,
    prefetch: int = dp.PREFETCH,
    max_retries: int = dp.MAX_RETRIES,
    why_lost: Callable[[int], str | None] | None = None,
    no_worker_grace: float = dp.NO_WORKER_GRACE_NS / 1e9,
    liveness: float | None = None,
    recovery_grace: float = dp.RECOVERY_GRACE_NS / 1e9,
    limits: Limits | None = None,
) -> HeadHost:
    """A head on ``loop`` listening on ``host:port`` (or an already bound ``sock``).

    ``local`` makes it stop itself and its workers when its last driver disconnects.
    ``worker_slots`` is how many tasks each worker gets at once: more than one hides the
    round trip between a result and the next task. ``prefetch`` is how many more a worker
    may get when they are known to be short (their recent runs took at most 0.5 ms), so that
    a stream of tiny tasks flows in batches instead of one round trip each. ``why_lost``
    names how a worker's process ended when its link drops (see the module docstring).
    ``no_worker_grace`` is how long, in seconds, tasks wait for a worker with their
    driver's registry before they fail saying that none has it. ``liveness`` is how long
    a worker may be silent before it is treated as lost (default ``DISTA_LIVENESS_TIMEOUT``,
    30 s; 0: never); ``recovery_grace`` how long, after a head restart, claims and holdings
    wait for each other, and a silent worker's objects for it to come back. ``limits``
    bound the connections it takes and how long one may wait to say hello (default: the
    ``DISTA_*`` variables, `_limits`).
    """
    if liveness is None:
        liveness = liveness_s()
    where = socket_address(sock)[0] if sock is not None else host
    warning = check_bind("dista head", where, tls_for("head"))  # ValueError: refused
    if warning:
        logging.getLogger("dista.head").warning("%s", warning)
    if limits is None:
        limits = limits_from_env()
    rng = random.SystemRandom()
    key, stable = resume_key(tls_for("head"))
    head = dp.Head(
        epoch=rng.getrandbits(63),
        first_number=rng.randrange(1, 1 << 24),
        max_retries=max_retries,
        worker_slots=worker_slots,
        prefetch=prefetch,
        exit_without_drivers=local,
        allocate=allocate,
        # By-value functions and put values run on any worker, whatever its registry.
        portable_tasks=(BY_VALUE_ID, PUT_ID, ACTOR_BY_VALUE_ID),
        by_value_task=BY_VALUE_ID,  # its argument begins with its function's digest
        no_worker_grace_ns=int(no_worker_grace * 1e9),
        liveness_ns=int(liveness * 1e9),
        recovery_grace_ns=int(recovery_grace * 1e9),
        hello_deadline_ns=int(limits.hello_timeout * 1e9),
        hello_idle_ns=int(limits.hello_idle_timeout * 1e9),
        idle_ns=int(limits.idle_timeout * 1e9),
        min_rate=limits.min_rate,
        rate_grace_ns=int(limits.rate_grace * 1e9),
        max_observers=limits.max_observers,
        inline_cap_bytes=inline_cap(),
        partial_cap_bytes=partial_cap(),
        wall_offset_ns=wall_offset_ns(),  # its timeline's stamps, for people
        # Drivers' secrets: from the TLS key, so that they resume across a restart.
        resume_key=key,
        resume_key_stable=stable,
    )
    host_ = HeadHost(loop, head, why_lost)
    host_.limit(limits)
    host_.memory = watch_memory(loop, host_.exited)  # the heap back after a burst
    host_.listener = loop.listen(host_, host, port, sock, host_.secure(False))
    return host_
