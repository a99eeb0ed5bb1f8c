"""A deterministic in-memory cluster over the sans-IO cores: one head, workers, drivers.

Every byte moves through in-memory pipes; a seeded `random.Random` decides chunk sizes,
which pipe moves next, when running tasks finish, and when a worker crashes. Nothing here
sleeps or opens a socket, so thousands of seeds run in seconds and a failing seed replays
exactly.
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import dista_proto as dp

PART = 1000  # small parts so that large objects cross in many pieces
THRESHOLD = 256  # small inline threshold so that stored results are common
TASK_ID = 7
#: An argument starting with these bytes makes the sim's task raise (`Sim` answers an error).
RAISES = b"\xed\x11\xfa\x00"
RAISED = "the task failed: it raised on purpose"


_ACTOR_WORK = (dp.StartActor, dp.CallActor, dp.CheckpointActor, dp.StopActor)
_ANSWER_KINDS: dict[type, str] = {
    dp.ObjectValue: "value",
    dp.ObjectFailed: "failed",
    dp.ObjectLocated: "located",
}


def compute(argument: bytes | None, inputs: tuple[bytes, ...], gather: bool) -> bytes:
    """The sim's task: a digest of everything it was given, stretched to a chosen size."""
    h = hashlib.blake2b(digest_size=16)
    h.update(argument or b"-")
    h.update(b"G" if gather else b"S")
    for value in inputs:
        h.update(hashlib.blake2b(value, digest_size=16).digest())
    size = struct.unpack_from("<I", argument)[0] if argument and len(argument) >= 4 else 16
    digest = h.digest()
    return (digest * (size // 16 + 1))[:size]


def arg(size: int, tag: int = 0) -> bytes:
    """A sim task's argument: the result's size, and a tag that makes it distinct."""
    return struct.pack("<II", size, tag)


def deliver_all(sim: Sim) -> None:
    """Move bytes only: no task finishes (rule tests finish them by hand)."""
    while busy := [p for p in sim.pipes if p.chunks or p.closed]:
        sim.deliver(busy[0])


@dataclass
class Pipe:
    """One direction of one connection: bytes waiting to be delivered."""

    target: object
    link: int
    chunks: deque[bytes] = field(default_factory=deque)
    closed: bool = False
    #: Why the peer went, as a head's binding knows it (a supervisor saw it die), if so.
    why: str | None = None


#: What the peers of odd seeds say they import (`Sim.named`): the workers all the drivers'
#: tasks and one more.
DRIVER_NAMES: Final = (0x51, 0x52)
WORKER_NAMES: Final = (0x51, 0x52, 0x53)


class SimWorker:
    def __init__(self, sim: Sim, index: int, checkpoints: bool = True) -> None:
        self.sim = sim
        self.has_store = checkpoints
        self.address = dp.Address(f"10.0.0.{index + 1}", 7000)
        self.core = dp.Worker(
            registry_hash=sim.worker_registry,
            task_names=WORKER_NAMES if sim.named else None,
            address=self.address,
            inline_threshold=THRESHOLD,
            part=PART,
            min_part=PART,
            heartbeat_ns=sim.heartbeat_ns,
            checkpoints=checkpoints,  # it reaches the sim's checkpoint store (`SimActors`)
            mapping=sim.mapping_for(self),
        )
        self.running: list[dp.RunTask] = []
        self.blocked: set[int] = set()  # running tasks blocked reading others (slot lent)
        self.alive = True
        # Actors (tests/sim/support/actors.py): actor decisions not yet run, in order, and the
        # actor this worker's process hosts (its in-memory state; a crash loses it).
        self.actor_work: deque[dp.Decision] = deque()
        self.hosted: object = None


class SimDriver:
    def __init__(self, sim: Sim, index: int) -> None:
        self.sim = sim
        self.index = index
        self.core = dp.Driver(
            registry_hash=sim.registry,
            part=PART,
            mapping=sim.mapping_for(self),
            task_names=DRIVER_NAMES if sim.named else None,
        )
        self.expected: dict[int, bytes | None] = {}  # None: expected to fail
        self.got: dict[int, bytes] = {}
        self.failed: dict[int, str] = {}
        self.live: list[int] = []  # held, not released
        self.located: set[int] = set()
        self.cancelled: set[int] = set()
        self.stats: list[dp.HeadStats] = []
        self.timeline: list[dp.TimelineRecord] = []
        # Every answer per object, in order ("value", "located", "failed"): duplicates show.
        self.answers: dict[int, list[str]] = {}
        self.warnings: list[dp.ActorWarning] = []
        self.notices: list[dp.ActorAwaitsHost] = []  # an actor waits for its host, or no more


class SimObserver:
    """`dista status` / `timeline` / `stop`: the `Observer` core, as the CLI uses it."""

    def __init__(self, sim: Sim) -> None:
        self.core = dp.Observer()
        self.link = sim.head.connection_made(sim.now)
        self.core.start(sim.now)
        self.sim = sim

    def ask(
        self, request: dp.Status | dp.Timeline | dp.Stop | dp.Snapshot | dp.Labels
    ) -> dp.Event | None:
        """The head's answer to ``request`` (None for stop, which the head answers by
        closing: its other decisions, stop frames to the workers, are carried out)."""
        sim, head, core = self.sim, self.sim.head, self.core
        core.ask(request, sim.now)
        answers: list[dp.Event] = []
        for decision in core.decisions():
            assert isinstance(decision, dp.Write), decision
            for buffer in decision.buffers:
                head.receive_data(self.link, bytes(buffer), sim.now)
        for decision in head.decisions():
            if isinstance(decision, dp.Write) and decision.link == self.link:
                for buffer in decision.buffers:
                    core.receive_data(dp.HEAD_LINK, bytes(buffer), sim.now)
            else:
                sim._act(head, decision)
        answers = [d.answer for d in core.decisions() if isinstance(d, dp.Answered)]
        if isinstance(request, dp.Stop):
            sim._run_decisions(head)
            return None
        assert len(answers) == 1, answers
        return answers[0]


class Sim:
    def __init__(
        self,
        seed: int,
        workers: int = 3,
        drivers: int = 2,
        worker_slots: int = 1,
        prefetch: int = 0,
        blocking: bool = False,
        liveness_ns: int = 0,
        recovery_grace_ns: int = dp.RECOVERY_GRACE_NS,
        heartbeat_ns: int = 5_000_000_000,
    ) -> None:
        self.rng = random.Random(seed)
        self.heartbeat_ns = heartbeat_ns
        # Whether running tasks block and resume at random (nested gets lend their slot).
        self.blocking = blocking
        self.runs: dict[int, int] = {}  # first result ID -> times a worker ran it to the end
        #: (worker, task) withdrawn there before it started: it must never run there. Keyed
        #: by worker: a copy a lost (silent) worker was given before keeps running there
        #: until it notices, and its answer is dropped.
        self.never_run: set[tuple[str, int]] = set()
        self.seed = seed
        # Runs one piece of a worker's `actor_work` (tests/sim/support/actors.py installs it).
        self.actor_runner: Callable[[SimWorker], None] | None = None
        # What a worker's binding finishes before its process exits (its killed actors'
        # checkpoints go: the runtime waits for that), installed the same way.
        self.actor_exit: Callable[[SimWorker], None] | None = None
        self.registry = 0xD15A
        # Odd seeds: the peers say which tasks they import (task-names) and the workers'
        # registry is their own, a superset of the drivers': every task goes to a worker
        # only because it serves the drivers' registry (docs/protocol.md, "Extensions: any
        # set of task modules"). Even seeds: one registry, no names, as the page has it.
        self.named = seed % 2 == 1
        self.worker_registry = 0x5EED if self.named else self.registry
        self.now = 1_000
        self.head = dp.Head(
            epoch=seed,
            first_number=self.rng.randrange(1, 1 << 24),
            worker_slots=worker_slots,
            prefetch=prefetch,
            # Silent workers are the fault scenarios' business: off unless they ask.
            liveness_ns=liveness_ns,
            recovery_grace_ns=recovery_grace_ns,
            # The scenarios' drivers sit quiet through graces of virtual minutes and send no
            # keepalives: closing them for it is tests/proto/test_peer_watch.py's business.
            idle_ns=0,
        )
        self.pipes: list[Pipe] = []
        self.ends: dict[tuple[int, int], Pipe] = {}  # (id(machine), link) -> pipe to the peer
        self.workers = [SimWorker(self, i) for i in range(workers)]
        self.drivers = [SimDriver(self, i) for i in range(drivers)]
        self.by_address = {w.address: w for w in self.workers}
        for w in self.workers:
            self._connect_to_head(w.core)
            w.core.start(self.now)
            self._run_decisions(w.core)
        for d in self.drivers:
            self._connect_to_head(d.core)
            d.core.start(self.now)
            self._run_decisions(d.core)

    def mapping_for(self, machine: SimWorker | SimDriver) -> dp.Mapping | None:
        """Same-host memory for ``machine``'s core: none (tests/sim/support/mapped.py has
        some)."""
        return None

    # -- wiring ----------------------------------------------------------------------------

    def _pair(self, a: object, a_link: int, b: object, b_link: int) -> None:
        to_b = Pipe(b, b_link)
        to_a = Pipe(a, a_link)
        self.pipes += [to_b, to_a]
        self.ends[(id(a), a_link)] = to_b
        self.ends[(id(b), b_link)] = to_a

    def _connect_to_head(self, core: dp.Worker | dp.Driver) -> None:
        link = self.head.connection_made(self.now)
        self._pair(core, 0, self.head, link)

    def _machine(self, core: object) -> SimWorker | SimDriver | None:
        for w in self.workers:
            if w.core is core:
                return w
        for d in self.drivers:
            if d.core is core:
                return d
        return None

    def _run_decisions(self, core: dp.Head | dp.Worker | dp.Driver) -> None:
        # Acting on a decision (a driver fetching what was located) may queue more.
        while decisions := core.decisions():
            for decision in decisions:
                self._act(core, decision)

    def _act(self, core: dp.Head | dp.Worker | dp.Driver, decision: dp.Decision) -> None:
        if isinstance(decision, dp.Write):
            pipe = self.ends.get((id(core), decision.link))
            if pipe is not None and not pipe.closed:
                pipe.chunks.append(b"".join(bytes(b) for b in decision.buffers))
        elif isinstance(decision, dp.Close):
            self._close(core, decision.link)
        elif isinstance(decision, dp.Connect):
            self._open_fetch(core, decision.link, decision.address)
        elif isinstance(decision, dp.RunTask):
            machine = self._machine(core)
            assert isinstance(machine, SimWorker)
            machine.running.append(decision)
        elif isinstance(decision, dp.CancelTask):
            machine = self._machine(core)
            assert isinstance(machine, SimWorker)
            self._cancel_task(machine, decision)
        elif isinstance(decision, dp.Exit):
            self.exited(core)
        elif isinstance(decision, dp.HeadLost):
            self.head_lost(core)
        elif isinstance(decision, _ACTOR_WORK):
            machine = self._machine(core)
            assert isinstance(machine, SimWorker)
            machine.actor_work.append(decision)
        else:
            machine = self._machine(core)
            assert isinstance(machine, SimDriver)
            self._driver_decision(machine, decision)

    def exited(self, core: object) -> None:
        """``core`` is done (`Exit`): its process would end (tests/sim/support/recovery.py)."""

    def head_lost(self, core: object) -> None:
        """``core`` lost its head and may connect again (tests/sim/support/recovery.py does)."""

    def _cancel_task(self, w: SimWorker, decision: dp.CancelTask) -> None:
        """The head wants a task back: it may not have started (dropped), or it runs and
        is interrupted (a cancel) or goes on (a withdrawal, or an interrupt it ignores)."""
        oid = decision.object_id
        task = next((t for t in w.running if t.object_id == oid), None)
        if task is None:
            return  # it finished meanwhile: its answers are on their way
        started = oid in w.blocked or self.rng.random() < 0.5
        if not started:
            w.running.remove(task)
            if not decision.withdraw:
                self.never_run.add((str(w.address), oid))
            w.core.task_withdrawn(oid, self.now)
        elif not decision.withdraw and self.rng.random() < 0.5:
            w.running.remove(task)
            if oid in w.blocked:
                w.blocked.discard(oid)
                w.core.task_resumed(oid, self.now)
            w.core.task_failed(oid, "TaskCancelledError: interrupted", self.now, self.now)

    def _open_fetch(self, core: object, link: int, address: dp.Address) -> None:
        target = self.by_address.get(address)
        assert isinstance(core, (dp.Worker, dp.Driver))
        if target is None or not target.alive:
            core.connection_lost(link, self.now)
            self._run_decisions(core)
            return
        server_link = target.core.connection_made(self.now)
        self._pair(core, link, target.core, server_link)
        core.connected(link, self.now)
        self._run_decisions(core)

    def _close(self, core: object, link: int) -> None:
        """``core`` closes ``link``: the peer sees end of stream once the bytes drain."""
        pipe = self.ends.pop((id(core), link), None)
        if pipe is not None:
            pipe.closed = True  # delivered bytes still flow, then the peer is told

    def _driver_decision(self, d: SimDriver, decision: dp.Decision) -> None:
        answer = (dp.ObjectValue, dp.ObjectFailed, dp.ObjectLocated)
        if isinstance(decision, answer) and decision.object_id:
            kind = _ANSWER_KINDS[type(decision)]
            d.answers.setdefault(decision.object_id, []).append(kind)
        if isinstance(decision, dp.ObjectValue):
            d.got[decision.object_id] = bytes(decision.value)
        elif isinstance(decision, dp.ObjectFailed):
            if decision.object_id:
                d.failed[decision.object_id] = decision.message
        elif isinstance(decision, dp.ObjectLocated):
            d.located.add(decision.object_id)
            if decision.object_id in d.live:
                d.core.fetch(decision.object_id)
        elif isinstance(decision, dp.StatsReceived):
            d.stats.append(decision.counts)
        elif isinstance(decision, dp.TimelineReceived):
            d.timeline.extend(decision.records)
        elif isinstance(decision, dp.ActorWarning):
            d.warnings.append(decision)
        elif isinstance(decision, dp.ActorAwaitsHost):
            d.notices.append(decision)

    # -- steps -----------------------------------------------------------------------------

    def deliver(self, pipe: Pipe) -> None:
        target = pipe.target
        assert isinstance(target, (dp.Head, dp.Worker, dp.Driver))
        if pipe.chunks:
            chunk = pipe.chunks.popleft()
            cut = self.rng.choice([1, 7, 64, len(chunk), len(chunk)])
            if cut < len(chunk):
                pipe.chunks.appendleft(chunk[cut:])
                chunk = chunk[:cut]
            target.receive_data(pipe.link, chunk, self.now)
        elif pipe.closed:
            self.pipes.remove(pipe)
            if isinstance(target, dp.Head):
                target.connection_lost(pipe.link, self.now, pipe.why)
            else:
                target.connection_lost(pipe.link, self.now)
            self.ends.pop((id(target), pipe.link), None)
        self._run_decisions(target)

    def finish_task(self, w: SimWorker) -> None:
        if self.blocking:
            roll = self.rng.random()
            free = [t for t in w.running if t.object_id not in w.blocked]
            if w.blocked and (not free or roll < 0.3):
                oid = self.rng.choice(sorted(w.blocked))
                w.blocked.discard(oid)
                w.core.task_resumed(oid, self.now)
                self._run_decisions(w.core)
                return
            if free and roll > 0.85:
                oid = self.rng.choice(free).object_id
                w.blocked.add(oid)
                w.core.task_blocked(oid, self.now)
                self._run_decisions(w.core)
                return
            choices = [i for i, t in enumerate(w.running) if t.object_id not in w.blocked]
            task = w.running.pop(self.rng.choice(choices))
        else:
            task = w.running.pop(self.rng.randrange(len(w.running)))
        assert (str(w.address), task.object_id) not in self.never_run, (
            f"seed {self.seed}: task {task.object_id:#x} ran after it was cancelled unstarted"
        )
        self.runs[task.object_id] = self.runs.get(task.object_id, 0) + 1
        started = self.now
        self.now += self.rng.randrange(1, 1000)
        if task.argument is not None and bytes(task.argument[:4]) == RAISES:
            w.core.task_failed(task.object_id, RAISED, started, self.now)
            self._run_decisions(w.core)
            return
        value = compute(task.argument, task.inputs, task.gather)
        values = [value + bytes([i]) for i in range(task.results)] if task.results > 1 else [value]
        w.core.task_done(task.object_id, values, started, self.now)
        self._run_decisions(w.core)

    def crash(self, w: SimWorker) -> None:
        """SIGKILL: every pipe to or from the worker breaks at once."""
        w.alive = False
        w.running.clear()
        w.blocked.clear()
        w.actor_work.clear()
        w.hosted = None
        self.crash_machine(w.core, f"worker {w.address} was killed (SIGKILL)")

    def step(self) -> bool:
        """Move one thing; False when nothing can move."""
        self.now += 1
        busy = [p for p in self.pipes if p.chunks or p.closed]
        runnable = [w for w in self.workers if w.alive and (w.running or w.actor_work)]
        if not busy and not runnable:
            return False
        if runnable and (not busy or self.rng.random() < 0.2):
            w = self.rng.choice(runnable)
            if w.actor_work and (not w.running or self.rng.random() < 0.5):
                assert self.actor_runner is not None, (
                    "actor work needs tests/sim/support/actors.py"
                )
                self.actor_runner(w)
            else:
                self.finish_task(w)
        else:
            self.deliver(self.rng.choice(busy))
        return True

    def settle(self, limit: int = 200_000) -> None:
        for _ in range(limit):
            if not self.step():
                return
        raise AssertionError(f"seed {self.seed}: the cluster did not settle in {limit} steps")

    def add_worker(self, checkpoints: bool = True) -> SimWorker:
        """A new worker joins (as a supervisor replaces a crashed one): a new address;
        without ``checkpoints`` it has no checkpoint store."""
        w = SimWorker(self, len(self.workers), checkpoints)
        self.workers.append(w)
        self.by_address[w.address] = w
        self._connect_to_head(w.core)
        w.core.start(self.now)
        self._run_decisions(w.core)
        return w

    def disconnect(self, d: SimDriver) -> None:
        """A driver process dies: its connection to the head breaks."""
        self.crash_machine(d.core, f"driver {d.index} exited")

    def crash_machine(self, core: object, why: str | None = None) -> None:
        """Every pipe to or from ``core`` breaks; ``why``: the head's binding knows it died."""
        for pipe in list(self.pipes):
            if pipe.target is core:
                self.pipes.remove(pipe)
        for (machine, link), pipe in list(self.ends.items()):
            if machine == id(core):
                del self.ends[(machine, link)]
                pipe.chunks.clear()
                pipe.closed = True
                pipe.why = why

    def driver_call(self, d: SimDriver) -> None:
        self._run_decisions(d.core)
