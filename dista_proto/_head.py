"""The head: a sans-IO scheduler and reference counter, as a router over its parts.

Theory of operation
-------------------
The binding reports links with the time (ns) and carries out `decisions()` after each call;
the head numbers drivers, runs their tasks on their registry's workers, counts references.

`Head` holds the parts that own the state and the rules, and routes each event to one of
them by its kind and the sender's role (one table per role, `_routes`):

- `Wire` (`_head_wire`): links, peers, the time, fetch grants;
- `Objects` (`_head_objects`): objects, references, settling, failure cascade, inline caps;
- `Scheduler` (`_head_scheduling`): ready queues, idle workers, slots, prefetch, runs, timeline;
- `ActorRequests`, `Actors` (with `Checkpoints`), `ActorNames`: calls, restore, names;
- `Holdings` (`_head_holdings`): claims, holdings, lost workers' objects, stale copies, drains;
- `Resume` (`_head_resume`): drivers resuming and away, calls parked for actors;
- `Guard` (`_head_security`): what peers may name, and links before their hello;
- `Answers` (`_head_answers`): stats, status and timeline, in passes bounded per peer.

Records move through `_lifecycle`'s tables; peers come, go and stop through `Membership`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from . import frame as F
from ._conventions import CANCEL_FORCE, TASK_ID_MASK
from ._credentials import Credentials
from ._decisions import Decision
from ._events import (
    ActorKill,
    Address,
    Adopted,
    Cancel,
    Checkpoint,
    Checkpointed,
    Claim,
    Drain,
    Error,
    Event,
    HeadStats,
    Hello,
    Holding,
    Release,
    Result,
    Resumed,
    Span,
    Stats,
    Status,
    Stop,
    Stored,
    Task,
    TaskAfter,
    TaskMany,
    TaskNames,
    Timeline,
)
from ._head_actor_names import ActorNames
from ._head_actor_requests import ActorRequests
from ._head_actor_spans import ActorSpans
from ._head_actors import Actors
from ._head_answers import ANSWER_BOUND, Answers
from ._head_checkpoints import DEFAULT_ACTOR_KEEP_BYTES
from ._head_counts import Counts
from ._head_defaults import (
    HELLO_DEADLINE_NS,
    HELLO_IDLE_NS,
    INLINE_CAP_BYTES,
    LIVENESS_NS,
    MAX_RETRIES,
    NO_WORKER_GRACE_NS,
    PREFETCH,
    RECOVERY_GRACE_NS,
    TIMELINE_CAP,
    WORKER_SLOTS,
)
from ._head_holdings import Holdings
from ._head_intake import Intake
from ._head_objects import Objects
from ._head_peers import Membership
from ._head_records import ActorRecord, ActorState, Peer
from ._head_resume import Resume
from ._head_scheduling import Scheduler
from ._head_security import Guard, may_stop
from ._head_status import status_text
from ._head_watching import Watching
from ._head_wire import Wire, grant_host
from ._partials import PARTIAL_CAP_BYTES
from ._peer_watch import IDLE_NS, MAX_OBSERVERS, MIN_RATE, RATE_GRACE_NS, PeerWatch
from ._roles import Role
from .frame import Bytes

__all__ = ["Head"]  # its defaults are `_head_defaults`'s

#: What the head does with an event of one kind from a peer of one role.
_Route = Callable[[Peer, Any], None]


class Head:
    """The head's parts and the routes between them; see the module docstring."""

    def __init__(
        self,
        *,
        epoch: int,
        first_number: int,
        max_retries: int = MAX_RETRIES,
        worker_slots: int = WORKER_SLOTS,
        prefetch: int = PREFETCH,
        timeline_cap: int = TIMELINE_CAP,
        exit_without_drivers: bool = False,
        allocate: Callable[[int], bytearray | memoryview] | None = None,
        portable_tasks: Iterable[int] = (),
        no_worker_grace_ns: int = NO_WORKER_GRACE_NS,
        actor_keep_bytes: int = DEFAULT_ACTOR_KEEP_BYTES,
        liveness_ns: int = LIVENESS_NS,
        recovery_grace_ns: int = RECOVERY_GRACE_NS,
        hello_deadline_ns: int = HELLO_DEADLINE_NS,
        hello_idle_ns: int = HELLO_IDLE_NS,
        inline_cap_bytes: int = INLINE_CAP_BYTES,
        wall_offset_ns: int = 0,
        idle_ns: int = IDLE_NS,
        min_rate: int = MIN_RATE,
        rate_grace_ns: int = RATE_GRACE_NS,
        max_observers: int = MAX_OBSERVERS,
        resume_key: bytes = b"",
        resume_key_stable: bool = False,
        answer_bound: int = ANSWER_BOUND,
        partial_cap_bytes: int = PARTIAL_CAP_BYTES,
        by_value_task: int = 0,
    ) -> None:
        self.epoch: Final = epoch
        # Where a frame of 1 MiB or more (a large argument) lands when read into place.
        self._allocate = allocate
        self._counts = counts = Counts()
        self._wire = wire = Wire(epoch, partial_cap_bytes)
        actor_records: dict[int, ActorRecord] = {}
        self._objects = objects = Objects(
            wire, counts, actor_ids=actor_records, inline_cap_bytes=inline_cap_bytes
        )
        self._scheduler = scheduler = Scheduler(
            wire,
            counts,
            objects,
            worker_slots=worker_slots,
            prefetch=prefetch,
            max_retries=max_retries,
            no_worker_grace_ns=no_worker_grace_ns,
            portable_tasks=frozenset(t & TASK_ID_MASK for t in portable_tasks),
            timeline_cap=timeline_cap,
            wall_offset_ns=wall_offset_ns,  # ``now`` is monotonic; timeline stamps wall-clock
        )
        self._holdings = holdings = Holdings(wire, objects, recovery_grace_ns=recovery_grace_ns)
        self._actors = actors = Actors(
            wire,
            counts,
            objects,
            scheduler,
            holdings,
            records=actor_records,
            max_retries=max_retries,
            keep_bytes=actor_keep_bytes,
            recovery_grace_ns=recovery_grace_ns,
        )
        self._requests = requests = ActorRequests(wire, counts, objects, scheduler, actors)
        self._resume = resume = Resume(
            wire,
            objects,
            actors,
            requests,
            holdings,
            scheduler.timeline,
            # Drivers' secrets: the key is an argument (the core draws no randomness); an
            # empty one (tests) makes secrets anyone who knows the epoch can compute.
            Credentials(resume_key, epoch=epoch, stable=resume_key_stable),
            recovery_grace_ns=recovery_grace_ns,
            exit_without_drivers=exit_without_drivers,
        )
        self._guard = Guard(
            wire,
            objects=objects.by_id,
            actors=actor_records,
            hello_deadline_ns=hello_deadline_ns,
            hello_idle_ns=hello_idle_ns,
        )
        owned = (objects, actor_records)  # links past hello: `PeerWatch`, paused by the host
        self.watch: Final = PeerWatch(wire, owned, idle_ns, min_rate, rate_grace_ns, max_observers)
        self._members = Membership(
            wire,
            objects,
            scheduler,
            actors,
            holdings,
            resume,
            self._guard.hello_watch,
            first_number=first_number,
            liveness_ns=liveness_ns,
            exit_without_drivers=exit_without_drivers,
        )
        self._answers = answers = Answers(wire, scheduler, self.stats, self.status, answer_bound)
        objects.bind(scheduler.enqueue, holdings, scheduler.ahead.waits)
        scheduler.bind(holdings, actors.kept_for)
        # h2's `_frame_dispatch_table`: one route per event kind, per sender role. (A
        # route takes the kind its key names: the tables pair them, hence `Any` below.)
        intake = Intake(wire, self._guard, resume, objects, scheduler, counts, by_value_task)
        self._driver_routes: dict[type[Event], _Route] = {
            Task: intake.on_task,
            TaskMany: intake.on_task,
            TaskAfter: intake.on_task_after,
            Release: self._on_release,
            Cancel: self._on_cancel,
            **resume.routes(),  # creates, calls, opens, answers, actor-order
            ActorKill: self._on_actor_kill,
            Checkpoint: requests.ask_checkpoint,
            Claim: self._on_claim,
            Resumed: self._on_resumed,
            Stats: answers.on_stats,
            Timeline: answers.on_timeline,
            TaskNames: self._members.on_task_names,
        }
        self._names = names = ActorNames(wire, actors, resume, self._on_actor_kill)
        self._driver_routes.update(names.routes())  # actor-name, -lookup; and before others
        #: A worker hosting an actor (started, or starting) runs nothing else: what these
        #: routes do not take is the actor's (`Actors.on_worker_event`).
        self._hosting_routes: dict[type[Event], _Route] = {
            Span: ActorSpans(wire, scheduler.timeline).on_span,  # its calls' timeline records
            Holding: holdings.on_holding,
            Adopted: holdings.on_adopted,
            Drain: self._on_drain,
            Checkpointed: actors.on_checkpointed,  # (or a removal's: `Stores.answered`)
            TaskNames: self._members.on_task_names,
        }
        self._worker_routes: dict[type[Event], _Route] = {
            **self._hosting_routes,
            Result: scheduler.on_answer,
            Stored: scheduler.on_answer,
            Error: actors.on_worker_error,  # (or a rejoiner's live actor)
            Span: scheduler.on_span,
        }
        self._observer_routes: dict[type[Event], _Route] = {
            Status: answers.on_status,
            Timeline: answers.on_all_timeline,
            Stop: self._on_stop,
        }
        self.watching: Final = Watching(
            wire, counts, scheduler, answers, resume, stats=self.stats, objects=objects.by_id,
            actors=actor_records, actor_names=self._names.names, wall_offset_ns=wall_offset_ns,
            liveness_ns=lambda: self._members.liveness_ns,
        )  # fmt: skip
        for role, routes in (
            (Role.DRIVER, self._driver_routes),
            (Role.OBSERVER, self._observer_routes),
            (Role.WORKER, self._hosting_routes),
            (Role.WORKER, self._worker_routes),
        ):
            routes.update(self.watching.routes(role))

    # -- settings the parts hold -----------------------------------------------------------

    @property
    def max_retries(self) -> int:
        return self._scheduler.max_retries

    @max_retries.setter
    def max_retries(self, value: int) -> None:
        self._scheduler.max_retries = self._actors.max_retries = value

    @property
    def actor_keep_bytes(self) -> int:
        return self._actors.checkpoints.keep_bytes

    @actor_keep_bytes.setter
    def actor_keep_bytes(self, value: int) -> None:
        self._actors.checkpoints.keep_bytes = value

    @property
    def inline_cap_bytes(self) -> int:
        return self._objects.inline_cap_bytes

    @inline_cap_bytes.setter
    def inline_cap_bytes(self, value: int) -> None:
        self._objects.inline_cap_bytes = value

    @property
    def worker_slots(self) -> int:
        return self._scheduler.worker_slots

    @property
    def prefetch(self) -> int:
        return self._scheduler.prefetch

    @property
    def no_worker_grace_ns(self) -> int:
        return self._scheduler.no_worker_grace_ns

    @property
    def recovery_grace_ns(self) -> int:
        return self._holdings.recovery_grace_ns

    @property
    def liveness_ns(self) -> int:
        """A worker silent this long is lost (0: never)."""
        return self._members.liveness_ns

    # -- counts ----------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Tasks waiting for inputs or a slot, and actor calls not answered."""
        return self._counts.pending

    @property
    def running(self) -> int:
        return self._counts.running

    @property
    def held_bytes(self) -> int:
        return self._counts.held_bytes

    @property
    def actors_alive(self) -> int:
        """Actors created and not ended: a local cluster starts a worker for each."""
        return self._counts.actors_alive

    @property
    def stopping(self) -> bool:
        return self._wire.stopping

    @property
    def drivers(self) -> int:
        """Connected drivers (clients excluded): a local head lives while there are any."""
        return self._wire.drivers

    # -- the binding's side ----------------------------------------------------------------

    def connection_made(self, now: int) -> int:
        """A peer connected: the link number to use for it from now on."""
        wire = self._wire
        link = wire.links.open(Role.HEAD)
        conn = wire.links.conn(link)
        assert conn is not None
        conn.share_partials(wire.partials)
        if self._allocate is not None:
            conn.land(None, self._allocate)
        wire.peers[link] = Peer(link)
        self._guard.hello_watch.opened(link, now)
        return link

    def peer(self, link: int, host: str) -> None:
        """The host (IP address) ``link``'s peer connects from, as the head's binding sees
        it: call it for every accepted link (127.0.0.1 for an in-memory one)."""
        peer = self._wire.peers.get(link)
        if peer is not None:
            peer.host = grant_host(host)

    def authenticated(
        self, link: int, roles: frozenset[str], identity: bytes = b"", subject: str = ""
    ) -> bool:
        """The peer on ``link`` proved a certificate granting ``roles``, whose DER's SHA-256
        is ``identity`` (a driver's secret is bound to it) and whose subject, for logs, is
        ``subject`` (`Guard`)."""
        return self._guard.authenticated(link, roles, identity, subject)

    def greeted(self, link: int) -> bool:
        """Whether ``link`` has said hello (`Guard`)."""
        return self._guard.greeted(link)

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        """Bytes read from ``link``."""
        self._wire.now = now
        events, error = self._wire.links.receive(link, data)
        self._received(link, events, error, len(data))

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes (`Connection.get_buffer`)."""
        return self._wire.links.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """`receive_data` for ``nbytes`` read into the view `get_buffer` gave."""
        self._wire.now = now
        events, error = self._wire.links.buffer_updated(link, nbytes)
        self._received(link, events, error, nbytes)

    def connection_lost(self, link: int, now: int, why: str | None = None) -> None:
        """The binding's connection for ``link`` closed (or failed).

        ``why`` is what the binding knows beyond the closed connection (a supervisor's
        "worker pid 4242 died: SIGSEGV"); it goes into the errors of what the peer took along.
        Without it the peer may well be alive (a link cut or reset): a worker's stored
        objects wait for it to rejoin with holding, as a silent worker's do (`Holdings`),
        and a driver is away, for a while, rather than gone (`Resume`).
        """
        wire = self._wire
        wire.now = now
        peer = wire.peers.get(link)
        wire.links.forget(link)
        self._answers.forget(link)  # its held requests: nothing more is built for it
        self.watching.forget(link)
        self._guard.hello_watch.done(link)
        self.watch.forget(link)
        if peer is None:
            return
        self._members.connection_lost(peer, why)

    def holding(self, link: int) -> bool:
        """Whether ``link``'s frames wait for its answers to be written (`Answers`)."""
        return self._answers.holding(link)

    def writable(self, link: int, now: int) -> None:
        """``link``'s answers were written: handle its held frames (`Answers`)."""
        self._wire.now = now
        if self._answers.holding(link):
            self._received(link, self._answers.take(link), None, 0)

    def decisions(self) -> list[Decision]:
        """What to do now: writes, closes, exit; in order."""
        return self._wire.links.decisions()

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do (nanoseconds, as ``now``), or None."""
        hello = self._guard.hello_watch
        parts = (self._actors, self._names, self._scheduler, self._members, hello, self.watch)
        times = [t for t in (part.next_deadline() for part in parts) if t is not None]
        return min(times) if times else None

    def on_timer(self, now: int) -> None:
        """Time passed: tasks and actors that waited out their grace fail, silent workers
        are lost, claims, holdings and away drivers that waited out theirs end."""
        self._wire.now = now
        self._actors.on_timer(now)
        self._names.on_timer(now)
        self._scheduler.on_timer(now)
        self._members.on_timer(now)
        self._guard.hello_watch.due(now, self._guard.no_hello)
        self.watch.due(now)

    # -- what the head tells ---------------------------------------------------------------

    def stats(self) -> HeadStats:
        counts = self._counts
        workers = sum(len(w) for w in self._scheduler.workers_of.values())
        objects = len(self._objects.by_id)
        return HeadStats(objects, counts.held_bytes, counts.pending, counts.running, workers)

    def status(self) -> str:
        actors = self._actors.records.values()
        text = status_text(self._wire, self.stats(), self._scheduler, actors)
        heavy = self._answers.heavy_lines()
        return text + "".join(f"{line}\n" for line in heavy)

    def actors(self) -> list[ActorRecord]:
        """The actors the head knows, live and dead (for status and tests)."""
        return list(self._actors.records.values())

    def tracked(self, oid: int) -> bool:
        """Whether the head still counts references for ``oid`` (for tests and status)."""
        return oid in self._objects.by_id

    def inline_bytes(self, number: int) -> int:
        """Bytes of driver ``number``'s inline results the head keeps (its cap's count)."""
        return self._objects.inline_bytes(number)

    def worker_address(self, link: int) -> Address | None:
        peer = self._wire.peers.get(link)
        return peer.address if peer is not None and peer.role == Role.WORKER else None

    def stop(self, why: str, now: int) -> None:
        """Stop as an observer's stop would: workers told to stop, drivers told why, Exit."""
        self._wire.now = now
        if not self._wire.stopping:
            self._members.stop(why)

    # -- routing ---------------------------------------------------------------------------

    def _received(self, link: int, events: list[Event], error: str | None, nbytes: int) -> None:
        wire = self._wire
        peers = wire.peers
        peer = peers.get(link)
        if peer is None:
            return
        peer.heard = wire.now
        if peer.role is None:
            self._guard.hello_watch.heard(link, wire.now)
        self.watch.heard(peer, nbytes)
        answers = self._answers
        if answers.holding(link):  # frames it sent before come first
            events = answers.take(link) if answers.hold(peer, events) else []
        answers.begin()
        for i, event in enumerate(events):
            if peers.get(link) is not peer:
                return  # refused mid-batch: the rest of its frames are moot
            self._route(peer, event)
            if answers.over:
                if error is not None:
                    break  # the link closes: what is past the bound is moot
                # This pass's answers reached the bound: the rest wait until the binding
                # has written them (`writable`), and it stops reading the peer meanwhile.
                if i + 1 < len(events):
                    answers.hold(peer, events[i + 1 :])
                return
        if error is not None:
            self._members.lose(peer, f"protocol error: {error}")
            wire.close(link, f"protocol error: {error}")

    def _route(self, peer: Peer, event: Event) -> None:
        role = peer.role
        if role is None:
            assert isinstance(event, Hello)  # the connection lets nothing else through first
            self.watch.hello(peer, event, self._members.hello)
            return
        if role == Role.WORKER:
            actor = peer.actor
            if actor is None or actor.state is ActorState.WAITING:
                route = self._worker_routes.get(type(event))
            else:
                route = self._hosting_routes.get(type(event))
                if route is None:
                    self._actors.on_worker_event(peer, actor, event)
                    return
        elif role == Role.OBSERVER:
            route = self._observer_routes.get(type(event))
        else:
            route = self._driver_routes.get(type(event))
            if route is None:
                oid = getattr(event, "object_id", 0)
                name = F.kind_name(event.kind)
                self._wire.links.send(
                    peer.link, Error(oid, f"{name} is not supported by this head")
                )
                return
        if route is not None:
            route(peer, event)

    # -- drivers ---------------------------------------------------------------------------

    def _on_release(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, Release)
        if not self._guard.foreign(peer, event.object_id):
            self._objects.release(peer, event.object_id)

    def _on_cancel(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, Cancel)
        if self._guard.foreign(peer, event.object_id):
            return
        stopped = self._objects.cancel(peer, event.object_id, event.mark == CANCEL_FORCE)
        if stopped is not None:
            self._members.lose(*stopped)

    def _on_actor_kill(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, ActorKill)
        if (stopped := self._requests.kill(peer, event)) is not None:
            self._members.lose(*stopped)  # a force-kill's worker

    def _on_claim(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, Claim)
        if not self._guard.foreign(peer, event.object_id):
            self._resume.on_claim(peer, event)

    def _on_resumed(self, peer: Peer, event: Event) -> None:
        self._resume.on_resumed(peer)

    # -- workers ---------------------------------------------------------------------------

    def _on_drain(self, worker: Peer, event: Event) -> None:
        if worker.draining:
            return
        worker.draining = True
        self._scheduler.forget_worker(worker)
        if worker.actor is not None:
            self._actors.move_off(worker)
        self._holdings.recheck(worker)

    # -- observers -------------------------------------------------------------------------

    def _on_stop(self, peer: Peer, event: Event) -> None:
        refusal = may_stop(peer.roles)
        if refusal is not None:
            self._wire.refuse(peer, refusal)
        else:
            self._members.stop("stopped by an observer")
