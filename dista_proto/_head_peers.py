"""Peers joining and leaving the head: hello and numbering, losing a peer (its connection
lost, refused, silent, or stopped), and the head stopping.

What a peer's arrival or departure means crosses the head's parts, so it is said here once,
in order: a worker that says hello takes slots (`Scheduler`), lets waiting actors be placed
(`Actors`) before it takes tasks, and may adopt what draining workers hold (`Holdings`); a
lost worker's tasks run again elsewhere, its actor restarts elsewhere, and what only it
held fails (or, if it may be alive, waits for it in limbo); a lost driver's tasks fail and
its references and actors go.

Liveness: the head notes when it last read from each worker; one silent for
``liveness_ns`` (SIGSTOP, a hung host, a link cut without a reset: workers send a
`SPAN_ALIVE` heartbeat every few seconds) is lost: its tasks are retried elsewhere, and
what it stored waits in limbo for it to rejoin. The head looks for silent workers, and for
the waits of `Holdings` and `Resume` that ran out, at most once a tick.
"""

from __future__ import annotations

from typing import Final

from ._conventions import (
    HELLO_ANY_REGISTRY,
    HELLO_CHECKPOINTS,
    HELLO_HOSTS_ACTOR,
    HELLO_RUNS_AHEAD,
    HELLO_SECRET,
    NUMBER_SPACE,
)
from ._credentials import fetch_token
from ._decisions import Exit
from ._events import ActorKill, Error, Hello, Stop, TaskNames, Welcome
from ._head_actors import Actors
from ._head_holdings import Holdings
from ._head_objects import Objects
from ._head_records import ActorState, Peer
from ._head_resume import Resume
from ._head_scheduling import Scheduler
from ._head_security import hello_refusal
from ._head_wire import Wire
from ._hello_watch import HelloWatch
from ._roles import Role

__all__ = ["Membership"]

#: How often the head looks for silent workers and expired waits, at most.
_TICK_NS: Final = 1_000_000_000


class Membership:
    """Who is connected: peers' hello, their loss, silence, and the head's stop."""

    def __init__(
        self,
        wire: Wire,
        objects: Objects,
        scheduler: Scheduler,
        actors: Actors,
        holdings: Holdings,
        resume: Resume,
        hello_watch: HelloWatch,
        *,
        first_number: int,
        liveness_ns: int,
        exit_without_drivers: bool,
    ) -> None:
        if not 1 <= first_number < NUMBER_SPACE:
            raise ValueError(f"first_number must be in [1, 2**24), not {first_number}")
        self._wire = wire
        self._objects = objects
        self._scheduler = scheduler
        self._actors = actors
        self._holdings = holdings
        self._resume = resume
        self._hello_watch = hello_watch
        self._next_number = first_number
        # A worker silent this long is lost (0: never).
        self.liveness_ns = liveness_ns
        # A local head lives while a driver is connected (clients don't count), then stops
        # itself and its workers.
        self.exit_without_drivers = exit_without_drivers
        self._tick_at = 0

    # -- hello -----------------------------------------------------------------------------

    def hello(self, peer: Peer, hello: Hello) -> None:
        wire = self._wire
        role = Role(hello.role)
        self._hello_watch.done(peer.link)
        refusal = hello_refusal(peer.roles, role)
        if refusal is not None:
            wire.refuse(peer, refusal)
            return
        peer.role = role
        peer.registry = hello.registry_hash
        if role == Role.WORKER:
            assert hello.address is not None
            peer.address = hello.address
            peer.any_registry = bool(hello.mark & HELLO_ANY_REGISTRY)
            if hello.mark & HELLO_HOSTS_ACTOR:
                self._actors.hosts.reserve(peer)  # a live actor: which one comes next
            peer.checkpoints = bool(hello.mark & HELLO_CHECKPOINTS)
            peer.runs_ahead = bool(hello.mark & HELLO_RUNS_AHEAD)
            self._replace_worker(peer)
            peer.heard = wire.now
            self._scheduler.add_worker(peer)
            self._actors.stores.store_came(peer)  # what ended while no store was there goes
            self._actors.place_waiting()  # actors that wait come first
            self._scheduler.offer(peer)
            self._holdings.recheck_holders(peer)  # it may adopt what they hold
        elif role in (Role.DRIVER, Role.CLIENT):
            number = self._number(peer, hello)
            if number == 0:
                return
            peer.number = number
            asked = hello.mark & HELLO_SECRET
            if hello.resume is None:
                peer.epoch = wire.epoch
                if asked:
                    credentials = self._resume.credentials
                    peer.secret = credentials.secret(wire.epoch, number, peer.identity)
            # A driver with a secret fetches by its token, not its host (`Wire.grant`).
            peer.token = fetch_token(peer.secret)
            wire.numbers[number] = peer
            wire.links.send(peer.link, Welcome(number, wire.epoch, peer.secret if asked else b""))

    def _number(self, peer: Peer, hello: Hello) -> int:
        if hello.resume is not None:
            # A driver of an earlier head keeps its number, so its object IDs stay valid.
            return self._resume.number(peer, hello)
        numbers = self._wire.numbers
        for _ in range(NUMBER_SPACE):
            number = self._next_number
            self._next_number = number + 1 if number + 1 < NUMBER_SPACE else 1
            if number not in numbers:
                return number
        self._wire.refuse(peer, "every driver number is in use")  # pragma: no cover
        return 0

    def _replace_worker(self, worker: Peer) -> None:
        """``worker`` says hello with the address of a worker still connected: the same
        worker, rejoining before its old connection's loss reached the head (a reset). The
        old connection is lost now, what it stored waiting for the holding that follows: its
        free of a copy the old connection held deleted the only one."""
        for old in self._wire.workers():
            if old is not worker and old.address == worker.address:
                why = "the same worker connected again"
                self._holdings.to_limbo(old, f"{old.name} connected again")
                self._wire.close(old.link, why)
                self.lose(old, why)

    # -- losing peers ----------------------------------------------------------------------

    def connection_lost(self, peer: Peer, why: str | None) -> None:
        """``peer``'s connection closed; ``why`` is what the binding knows beyond that.
        Without it the peer may well be alive (a link cut or reset): a worker's stored
        objects wait for it to rejoin with holding, as a silent worker's do (`Holdings`),
        and a driver is away, for a while, rather than gone (`Resume`)."""
        if why is None:
            if peer.role == Role.WORKER:
                # A draining worker gone was most likely told to leave and left at its drain
                # timeout: its objects' errors say so. Its link may also have been cut
                # (it rejoins, draining still), so they wait for it as any worker's do.
                gone = f"{peer.name} disconnected (connection lost)"
                if peer.draining:
                    gone = self._holdings.left_draining(peer)
                self._holdings.to_limbo(peer, gone)
            elif self._resume.went_away(peer):
                return
        self.lose(peer, why or "connection lost")

    def on_task_names(self, peer: Peer, event: TaskNames) -> None:
        """Right after its hello: the tasks ``peer`` imports (`Scheduler.learn_names`)."""
        if peer.names_sent:  # (a peer's names are its registry's: they never change)
            why = "protocol error: a second task-names on one connection"
            self.lose(peer, why)
            self._wire.close(peer.link, why)
        elif self._scheduler.learn_names(peer, frozenset(event.names)):
            self._actors.place_waiting()  # actors of the registries it now serves

    def lose(self, peer: Peer, why: str) -> None:
        if self._wire.peers.pop(peer.link, None) is None:
            return
        if peer.role == Role.WORKER:
            self._wire.departed.append((peer, why, self._wire.now))
            self._lose_worker(peer, why)
        elif peer.role in (Role.DRIVER, Role.CLIENT):
            self._lose_driver(peer)
        self._scheduler.names_gone(peer)
        if peer.role == Role.DRIVER and self.exit_without_drivers and not self._wire.drivers:
            self.stop("the last driver left")

    def _lose_worker(self, worker: Peer, why: str) -> None:
        scheduler = self._scheduler
        scheduler.forget_worker(worker)
        self._actors.worker_lost(worker, why)
        scheduler.lose_tasks(worker, why)
        self._objects.holder_lost(worker, why)
        scheduler.pump(worker.registry)
        self._holdings.adopter_lost(worker)

    def _lose_driver(self, driver: Peer) -> None:
        self._wire.numbers.pop(driver.number, None)
        self._actors.ends_with(driver)
        self._objects.drop_driver(driver)

    def stop(self, why: str) -> None:
        """Workers told to stop, drivers told why, then Exit."""
        wire = self._wire
        wire.stopping = True
        for peer in list(wire.peers.values()):
            if peer.role == Role.WORKER:
                if peer.actor is not None and peer.actor.state is not ActorState.DEAD:
                    # The cluster ends, and its actors with it: their checkpoints go (the
                    # worker finishes removing them before it exits).
                    wire.links.send(peer.link, ActorKill(peer.actor.actor_id))
                wire.links.send(peer.link, Stop())
                wire.close(peer.link, why)
            elif peer.role in (Role.DRIVER, Role.CLIENT):
                wire.links.send(peer.link, Error(0, f"the head is stopping: {why}"))
                wire.close(peer.link, why)
        wire.links.queue(Exit(why))

    # -- the tick: silence and expired waits -----------------------------------------------

    def next_deadline(self) -> int | None:
        watching = self._holdings.watching() or self._resume.watching()
        if not watching and not (self.liveness_ns and self._scheduler.workers_of):
            return None
        return self._tick_at

    def on_timer(self, now: int) -> None:
        if now < self._tick_at:
            return
        self._tick_at = now + min(_TICK_NS, max(self.liveness_ns // 4, 1_000_000))
        if self.liveness_ns:
            late = now - self.liveness_ns
            for peer in self._wire.workers():
                if peer.heard < late:
                    self._silent(peer)
        for driver in self._resume.on_timer(now):
            self._lose_driver(driver)  # it did not come back
        self._holdings.on_timer(now)

    def _silent(self, worker: Peer) -> None:
        """``worker`` said nothing for the liveness timeout: it is lost, but what it stored
        waits for it to rejoin."""
        seconds = self.liveness_ns / 1e9
        why = f"silent for {seconds:g} s (no heartbeat: stopped, hung, or cut off)"
        self._holdings.to_limbo(worker, f"{worker.name} went {why}")
        self._wire.close(worker.link, why)
        self.lose(worker, why)
