"""The worker: tasks in, "run this" out; answers back; an object server for what it keeps.

Theory of operation
-------------------
Link 0 is the head. `start` sends hello with the registry hash and the object server's
address. A task or task-many becomes a `RunTask` decision at once; a task-inputs first
gathers its inputs: inline ones are in the frame, stored ones are fetched (from this
worker's own store when the location is its own address, else over a fetcher link), and
the `RunTask` follows when the last one arrives. If an input cannot be fetched, every
result of the task fails with an error naming the input and where it was.

When the binding reports a task done (`task_done` / `task_failed`) the worker sends span,
then one answer per result: a result frame inline, or, above ``inline_threshold``, the
value stays in the store and a stored frame says its size. Fetches arriving at the object
server are answered from where the value lies: one result frame, or part frames of the
size the fetcher asked for; an empty fetch of an object too large for one frame gets an
error frame. With ``check_fetches`` a fetch is served only to a fetcher the head granted
the object to, or to a cluster member by TLS (`_grants`: the head's located frames to a
worker are grants); others wait for a grant, then are refused. Free deletes; stop ends the
worker. The head's frames are routed by their type through one table (`_on_head`); the
actor frames go to the `ActorHosting` the worker holds (`_worker_actors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from . import frame as F
from ._conventions import (
    ERROR_COVERED,
    FREE_STORE,
    FREE_WITHDRAW,
    HEAD_LINK,
    HELLO_ANY_REGISTRY,
    HELLO_CHECKPOINTS,
    HELLO_HOSTS_ACTOR,
    HELLO_RUNS_AHEAD,
    MIN_FETCH_PART,
    SPAN_ALIVE,
    SPAN_BLOCKED,
    SPAN_RESUMED,
    SPAN_WITHDRAWN,
)
from ._core import to_wall
from ._decisions import CancelTask, Decision, Exit, HeadLost, RunTask
from ._events import (
    ActorBuild,
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorRestore,
    Address,
    Adopt,
    Adopted,
    Checkpoint,
    Drain,
    Error,
    Event,
    Fetch,
    Free,
    Hello,
    Holding,
    HoldingEntry,
    Located,
    Result,
    Span,
    Stop,
    Stored,
    Task,
    TaskInputs,
    TaskMany,
)
from ._fetcher import Fetcher
from ._grants import FETCH_GRANT_WAIT_NS, FETCH_IDLE_NS, FetchGate
from ._links import Links
from ._mapping import Mapping
from ._roles import Role
from ._serving import answer_fetch
from ._telling import Telling
from ._worker_actors import ActorHosting
from ._worker_inputs import Inputs
from .frame import Bytes

__all__ = ["DEFAULT_INLINE_THRESHOLD", "HEARTBEAT_NS", "Worker"]

#: Results above this many bytes stay on the worker (stored) instead of going inline.
DEFAULT_INLINE_THRESHOLD: Final = 64 * 1024
#: How often a worker tells the head it is alive (`SPAN_ALIVE`); a head's liveness timeout
#: (30 s by default) should be several of these.
HEARTBEAT_NS: Final = 5_000_000_000


class Worker:
    def __init__(
        self,
        *,
        registry_hash: int,
        address: Address,
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        part: int = F.PART_SIZE,
        allocate: Callable[[int], bytearray | memoryview] = bytearray,
        min_part: int = MIN_FETCH_PART,
        heartbeat_ns: int = HEARTBEAT_NS,
        check_fetches: bool = False,
        fetch_wait_ns: int = FETCH_GRANT_WAIT_NS,
        fetch_idle_ns: int = FETCH_IDLE_NS,
        wall_offset_ns: int = 0,
        accept_by_value: bool = False,
        checkpoints: bool = False,
        mapping: Mapping | None = None,
        runs_ahead: bool = True,
        task_names: Iterable[int] | None = None,
    ) -> None:
        if not 0 <= inline_threshold <= F.MAX_PAYLOAD:
            raise ValueError(
                f"inline_threshold must be in [0, MAX_PAYLOAD], not {inline_threshold}"
            )
        self.registry_hash = registry_hash
        #: Its tasks' name hashes, sent after each hello (task-names); None: none.
        self.address = address
        #: Run by-value code of drivers of any registry (`HELLO_ANY_REGISTRY` in its hello).
        self.accept_by_value = accept_by_value
        #: It has a checkpoint store (`HELLO_CHECKPOINTS` in its hello).
        self.checkpoints = checkpoints
        #: It runs tasks sent ahead of their inputs (`HELLO_RUNS_AHEAD` in its hello).
        self.runs_ahead = runs_ahead
        self.inline_threshold = inline_threshold
        self._links = Links()
        #: What it says of itself after each hello: task names; and vitals.
        self.telling: Final = Telling(self._links, task_names)
        self._fetcher = Fetcher(self._links, part, allocate, mapping)
        self._allocate = allocate
        # Stored objects go to fetchers on this host as memory files where it can.
        self._mapping = mapping
        # The smallest part our object server cuts for a fetcher (tests lower it).
        self.min_part = min_part
        self._servers: set[int] = set()
        # Who may fetch what: off (everyone) unless the binding knows its fetchers' hosts.
        self._gate = FetchGate(
            check=check_fetches,
            wait_ns=fetch_wait_ns,
            idle_ns=fetch_idle_ns,
            own_host=address.host,
        )
        self.store: dict[int, Bytes] = {}
        self._jobs: dict[int, tuple[int, int]] = {}  # first result ID -> (results, arrived)
        self._store_all: set[int] = set()  # tasks whose results are stored whatever their size
        self._inputs = Inputs(address, self.store, self._fetcher.request)
        self.stopped: bool = False
        #: Told to stop (SIGTERM): it takes no more work and leaves once the head says stop.
        self.draining: bool = False
        self.heartbeat_ns = heartbeat_ns
        self._beat_at: int | None = None
        self._hellos = 0  # a hello after the first rejoins, with holding
        self._adopting: dict[int, Address] = {}  # object -> the draining worker it comes from
        #: Wall minus monotonic: a span's stamps (``now``, and the runtime's started and
        #: ended, all monotonic) leave on the wall clock (`_core`).
        self.wall_offset_ns = wall_offset_ns
        self._actors = ActorHosting(self._links)
        actors = self._actors
        #: The head's frames by type -> their handler (a frame of another kind is ignored).
        self._on_head: Final[dict[type[Event], Callable[[Any, int], None]]] = {
            Task: self._on_task,
            TaskMany: self._on_task_many,
            TaskInputs: self._gather,
            Free: self._free,
            Adopt: self._adopt,
            Located: self._on_grant,
            Stop: self._on_stop,
            ActorCall: self._on_actor_call,
            ActorCreate: actors.start,
            ActorRestore: actors.start,
            Checkpoint: actors.checkpoint,
            ActorKill: actors.kill,
            ActorBuild: actors.numbered,
        }

    @property
    def actor(self) -> int:
        """The actor this worker hosts (0: none)."""
        return self._actors.actor

    @property
    def actors(self) -> ActorHosting:
        """The actor work's reports go here: `ActorHosting.actor_started`, `checkpointed`."""
        return self._actors

    def call_covered(self, oid: int) -> None:
        """The checkpoint the actor was restored from includes call ``oid``: not run."""
        if self._actors.stale(oid):
            return
        if self._jobs.pop(oid, None) is not None:
            why = f"actor call {oid:#x} is in the checkpoint the actor was restored from"
            self._links.send(HEAD_LINK, Error(oid, why, ERROR_COVERED))

    # -- the binding's side -------------------------------------------------------------------

    def start(self, now: int) -> None:
        """The connection to the head is up: say hello (rejoining: with holding)."""
        self._links.open(Role.WORKER, HEAD_LINK)
        conn = self._links.conn(HEAD_LINK)
        assert conn is not None
        # A large argument (a task frame of 1 MiB or more) lands in one buffer from
        # `allocate`, read into place, instead of growing the read buffer by copies.
        conn.land(None, self._allocate)
        send = self._links.send
        mark = HELLO_RUNS_AHEAD if self.runs_ahead else 0
        mark |= HELLO_ANY_REGISTRY if self.accept_by_value else 0
        mark |= HELLO_CHECKPOINTS if self.checkpoints else 0
        if self._hellos and self._actors.actor:
            mark |= HELLO_HOSTS_ACTOR  # the head gives us nothing until it hears which
        send(HEAD_LINK, Hello(F.ROLE_WORKER, self.registry_hash, self.address, mark=mark))
        self.telling.hello()
        if self._hellos:
            address = self.address
            send(HEAD_LINK, Holding(tuple(HoldingEntry(o, address) for o in self.store)))
            self._actors.rejoined()
        if self.draining:
            send(HEAD_LINK, Drain())  # still draining: the new head moves what it holds
        self._hellos += 1
        self._beat_at = now + self.heartbeat_ns if self.heartbeat_ns else None

    def drain(self, now: int) -> None:
        """Told to stop (SIGTERM): ask the head to move what this worker holds; the head
        sends stop once it runs nothing and holds nothing (`Exit` follows)."""
        if not self.draining and not self.stopped:
            self.draining = True
            self._links.send(HEAD_LINK, Drain())

    def connection_made(self, now: int) -> int:
        """A fetcher connected to our object server: the link to use for it."""
        link = self._links.open(Role.OBJECT_SERVER)
        self._servers.add(link)
        self._gate.opened(link, now)
        return link

    @property
    def check_fetches(self) -> bool:
        """Whether fetches need the head's grant (or a member's certificate)."""
        return self._gate.check

    @check_fetches.setter
    def check_fetches(self, value: bool) -> None:
        self._gate.check = value

    def peer(self, link: int, host: str) -> None:
        """The host (IP address) at the other end of ``link``: for each object-server link
        `connection_made` gave, the fetcher's; for `HEAD_LINK`, the head's, as this worker
        sees it (a grant to loopback means that host)."""
        if link == HEAD_LINK:
            self._gate.head_host(host)
        elif link in self._servers:
            self._gate.peer(link, host)

    def greeted(self, link: int) -> bool:
        """Whether object-server ``link`` has sent a complete frame (a fetcher says no
        hello: this is its greeting); any other link, or a gone one, counts as greeted, so
        a binding evicting the oldest silent connection never picks a gone one."""
        return link not in self._servers or self._gate.greeted(link)

    def authenticated(self, link: int, roles: frozenset[str]) -> bool:
        """Object-server ``link``'s TLS certificate carries ``roles``: whether it may fetch
        (``worker`` or ``admin``: anything; ``driver``: what the head grants its host). On
        False the binding closes the link before reading a frame."""
        return link in self._servers and self._gate.authenticated(link, roles)

    def connected(self, link: int, now: int) -> None:
        """A link we asked for with `Connect` is up."""
        self._links.connected(link)

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        events, error = self._links.receive(link, data)
        self._received(link, events, error, now)

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes (`Connection.get_buffer`)."""
        return self._links.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """`receive_data` for ``nbytes`` read into the view `get_buffer` gave."""
        events, error = self._links.buffer_updated(link, nbytes)
        self._received(link, events, error, now)

    def _received(self, link: int, events: list[Event], error: str | None, now: int) -> None:
        if link == HEAD_LINK:
            handlers = self._on_head
            for event in events:
                handler = handlers.get(type(event))
                if handler is not None:
                    handler(event, now)
        elif link in self._servers:
            if events:
                self._gate.heard(link)
            for event in events:
                if isinstance(event, Fetch):
                    self._admit(link, event, now)
        elif self._fetcher.owns(link):
            for oid, value, why in self._fetcher.receive(link, events):
                self._fetched(oid, value, why)
        if error is not None:
            self._links.close(link, f"protocol error: {error}")
            self.connection_lost(link, now)

    def connection_lost(self, link: int, now: int) -> None:
        self._links.forget(link)
        if link == HEAD_LINK:
            self._head_lost("the head connection was lost")
        elif link in self._servers:
            self._servers.discard(link)
            self._gate.closed(link)
        else:
            for oid, value, why in self._fetcher.lost(link, "connection lost"):
                self._fetched(oid, value, why)

    def _head_lost(self, why: str) -> None:
        """The head is gone: what it gave us is moot (a resuming driver sends its unfinished
        tasks again, the new head reruns them), what we store stays and is served; the
        actor stays too, alive (a new head places it back here: its state is the one every
        answer it gave came from)."""
        self._beat_at = None
        if self.stopped:
            self._links.queue(Exit(why))
            return
        for oid in list(self._jobs):
            if oid not in self._inputs.gathering:
                self._links.queue(CancelTask(oid, False))  # interrupted; answers dropped
        self._jobs.clear()
        self._store_all.clear()
        self._inputs.clear()
        self._actors.head_lost()
        self._links.queue(HeadLost(why))

    def decisions(self) -> list[Decision]:
        return self._links.decisions()

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do: the next heartbeat, while joined; a fetch's wait
        for its grant running out; a silent object-server link's idle time."""
        beat = self._beat_at
        gate = self._gate.next_deadline()
        if gate is None or (beat is not None and beat < gate):
            return beat
        return gate

    def on_timer(self, now: int) -> None:
        """Time passed: tell the head we are alive (`SPAN_ALIVE`) when it is time; refuse
        fetches that waited out their grant; close links that stayed silent."""
        beat = self._beat_at
        if beat is not None and now >= beat:
            self._links.send(HEAD_LINK, Span(0, 0, 0, 0, SPAN_ALIVE))
            self._beat_at = now + self.heartbeat_ns
        refused, silent = self._gate.expired(now)
        for link, oid, why in refused:
            self._links.send(link, Error(oid, why))
        idle = self._gate.idle_ns / 1e9
        for link in silent:
            self._links.close(link, f"sent no complete frame in {idle:g} s")
            self.connection_lost(link, now)

    # -- tasks ---------------------------------------------------------------------------------

    # Every head-frame handler takes the frame and the time (`_on_head`).

    def _on_task(self, event: Task, now: int) -> None:
        self._run(event.object_id, event.task_id, 1, event.argument, (), False, False, now)

    def _on_task_many(self, event: TaskMany, now: int) -> None:
        self._run(
            event.object_id, event.task_id, event.results, event.argument, (), False, False, now
        )

    def _on_grant(self, event: Located, now: int) -> None:
        """The head is about to tell the fetcher at this host (or showing this token) where
        the object lies."""
        held = event.object_id in self.store
        grant = self._gate.grant(event.object_id, event.address.host, held, event.token)
        for link, fetch in grant:
            self._serve(link, fetch)

    def _on_stop(self, event: Stop, now: int) -> None:
        self.stopped = True
        self._links.close(HEAD_LINK, "stopped by the head")
        self._links.queue(Exit("stopped by the head"))

    def _on_actor_call(self, event: ActorCall, now: int) -> None:
        if self._actors.call(event, now):
            self._jobs[event.object_id] = (1, now)  # reported like a task

    def _free(self, event: Free, now: int) -> None:
        oid = event.object_id
        if event.mark == FREE_STORE:
            self._store_all.add(oid)  # the task follows: see `task_done`
            return
        withdraw = event.mark == FREE_WITHDRAW
        if not withdraw:
            self.store.pop(oid, None)
            self._gate.drop(oid)
        if oid not in self._jobs:
            return
        if self._inputs.drop(oid):
            # Still gathering its inputs: it has not started, so it never will.
            self.task_withdrawn(oid, now)
        else:
            # The binding knows whether it started: it drops it, or interrupts a cancelled one.
            self._links.queue(CancelTask(oid, withdraw))

    def task_withdrawn(self, oid: int, now: int) -> None:
        """The binding dropped the task whose first result is ``oid`` without running it."""
        job = self._jobs.pop(oid, None)
        self._store_all.discard(oid)
        if job is not None:
            self._send_span(oid, job[1], now, now, SPAN_WITHDRAWN)
            self._not_made(oid, job[0], now)

    def _not_made(self, oid: int, results: int, now: int) -> None:
        """The results from ``oid`` will not be made here: tasks sent ahead of them go back."""
        for i in range(results):
            if self._inputs.waits_for(oid + i):
                for job, _ in self._inputs.arrived(oid + i, None):
                    self.task_withdrawn(job.event.object_id, now)

    def task_blocked(self, oid: int, now: int) -> None:
        """The task whose first result is ``oid`` waits for other objects: its slot is free."""
        job = self._jobs.get(oid)
        if job is not None:
            self._send_span(oid, job[1], now, now, SPAN_BLOCKED)

    def task_resumed(self, oid: int, now: int) -> None:
        """The blocked task whose first result is ``oid`` runs again."""
        job = self._jobs.get(oid)
        if job is not None:
            self._send_span(oid, job[1], now, now, SPAN_RESUMED)

    def _run(
        self,
        oid: int,
        task_id: int,
        results: int,
        argument: Bytes | None,
        inputs: tuple[Bytes, ...],
        gather: bool,
        after: bool,
        now: int,
    ) -> None:
        self._jobs[oid] = (results, now)
        self._links.queue(RunTask(oid, task_id, results, argument, inputs, gather, after, now))

    def _gather(self, event: TaskInputs, now: int) -> None:
        first, results = event.object_id, event.results or 1
        job = self._inputs.gather(event, self._making)
        if isinstance(job, str):
            self._fail_job(event, job, now)
        elif job is None:  # sent ahead of an input that will not be made here: back it goes
            self._jobs[first] = (results, now)
            self.task_withdrawn(first, now)
        elif job.missing:
            self._jobs[first] = (results, now)
        else:
            self._run(
                first,
                event.task_id,
                results,
                event.value,
                job.start_values(),
                event.gather,
                True,
                now,
            )

    def _making(self, oid: int) -> bool:
        """Whether a task this worker holds (running, or itself waiting) makes ``oid``."""
        jobs = self._jobs
        return oid in jobs or any(f <= oid < f + n for f, (n, _) in jobs.items())

    def _adopt(self, event: Adopt, now: int) -> None:
        """Keep a draining worker's object as our own (adopted answers with where it is)."""
        oid = event.object_id
        if oid in self.store:
            self._links.send(HEAD_LINK, Adopted(oid, self.address))
        elif oid not in self._adopting:
            self._adopting[oid] = event.address
            self._fetcher.request(oid, event.address)

    def _fetched(self, oid: int, value: Bytes | None, why: str) -> None:
        source = self._adopting.pop(oid, None)
        if source is not None:
            if value is None:
                self._links.send(HEAD_LINK, Adopted(oid, None, f"from {source}: {why}"))
            else:
                self.store[oid] = value
                self._links.send(HEAD_LINK, Adopted(oid, self.address))
        self._arrived(oid, value, f"input {oid:#x} could not be fetched: {why}")

    def _arrived(self, oid: int, value: Bytes | None, why: str) -> None:
        """Input ``oid`` is here (``value``), or will not come (the tasks waiting for it
        fail saying ``why``)."""
        for job, whole in self._inputs.arrived(oid, value):
            event = job.event
            first, arrived = event.object_id, self._jobs[event.object_id][1]
            if not whole:
                self._fail_job(event, why, arrived)
                continue
            results, values = event.results or 1, job.start_values()
            self._run(
                first, event.task_id, results, event.value, values, event.gather, True, arrived
            )

    def _fail_job(self, event: TaskInputs, why: str, now: int) -> None:
        self._jobs[event.object_id] = (event.results or 1, now)
        self.task_failed(event.object_id, why, now, now)

    def task_done(self, oid: int, values: Sequence[Bytes], started: int, ended: int) -> None:
        """The task whose first result is ``oid`` returned ``values``, one per result."""
        if self._actors.stale(oid):
            return
        job = self._jobs.pop(oid, None)
        if job is None:
            return
        results, arrived = job
        if len(values) != results:
            self._jobs[oid] = job
            why = f"the task returned {len(values)} values for its {results} results"
            self._failed(oid, why, started, ended)
            return
        self._send_span(oid, arrived, started, ended)
        send = self._links.send
        threshold = self.inline_threshold
        if self._store_all and oid in self._store_all:
            self._store_all.discard(oid)
            threshold = -1  # the head keeps no more of its driver's results inline
        inputs, ahead = self._inputs, self.runs_ahead
        for i, value in enumerate(values):
            if len(value) > threshold:
                self.store[oid + i] = value
                send(HEAD_LINK, Stored(oid + i, len(value)))
            else:
                send(HEAD_LINK, Result(oid + i, value))
                if ahead:  # (only a worker that runs ahead is sent tasks wanting it)
                    inputs.sent(oid + i, value)
            if inputs.waits_for(oid + i):  # tasks sent ahead of it start now
                self._arrived(oid + i, value, "")

    def task_failed(self, oid: int, message: str, started: int, ended: int) -> None:
        """The task whose first result is ``oid`` raised: every result fails with ``message``."""
        if self._actors.stale(oid):
            return
        self._failed(oid, message, started, ended)

    def _failed(self, oid: int, message: str, started: int, ended: int) -> None:
        job = self._jobs.pop(oid, None)
        self._store_all.discard(oid)
        if job is None:
            return
        results, arrived = job
        self._send_span(oid, arrived, started, ended)
        for i in range(results):
            self._links.send(HEAD_LINK, Error(oid + i, message))
        self._not_made(oid, results, ended)

    def _send_span(self, oid: int, arrived: int, started: int, ended: int, mark: int = 0) -> None:
        """Tell the head when a task arrived, started and ended, on the wall clock."""
        offset = self.wall_offset_ns
        span = Span(
            oid, to_wall(arrived, offset), to_wall(started, offset), to_wall(ended, offset), mark
        )
        self._links.send(HEAD_LINK, span)

    # -- the object server ---------------------------------------------------------------------

    def _admit(self, link: int, fetch: Fetch, now: int) -> None:
        verdict = self._gate.admit(link, fetch, now)
        if verdict is None:
            self._serve(link, fetch)
        elif verdict:
            self._links.send(link, Error(fetch.object_id, verdict))
        # else it waits for the head's grant (`_on_grant`) or its deadline (`on_timer`)

    def _serve(self, link: int, fetch: Fetch) -> None:
        value = self.store.get(fetch.object_id)
        send = self._links.send
        for event in answer_fetch(fetch, value, self.address, self.min_part, self._mapping):
            send(link, event)
