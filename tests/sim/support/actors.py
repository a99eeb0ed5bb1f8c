"""The simulation's actors: what a binding does with the worker's actor decisions.

The sim actor's state is a u64, the sum of its calls' values mod 2**64, plus, per caller
(driver number), the newest call ID it ran: a call from a caller must come after that
caller's previous one ("calls run in the order the driver sent them"). A call's argument is
a u64; `ADD` adds it and answers the new state (8 bytes, stretched past the sim's inline
threshold for one value in four so that call results are stored on workers too); `RAISE`
answers an error and leaves the state alone.

`SimActors.disk` is the checkpoint store: `CheckpointActor` writes (state, per-caller
newest) under (actor, calls) and removes that actor's checkpoints older than ``keep``;
a `StartActor` that restores must find exactly the checkpoint it names, or, for
`RESTORE_NEWEST` (a head restarted), the newest there is (`no_checkpoint` if none). Each piece
of actor work runs when the sim's `step` picks it (one at a time, in order, per worker), and
every rule the cores owe a binding is asserted as it runs: a checkpoint covers exactly the
calls sent before it, the call at position N of an actor is always the same call, a call run
again (replayed after a restore) answers exactly as it did the first time.

A checkpoint's name (the calls it covers, in the head's numbering: ``label``) counts the
calls the head numbered for the actor since it was built. After a head restart a call the
restored checkpoint already includes (its ID at most the checkpoint's newest for its
caller) is not run (`Worker.call_covered`), and takes no place in the numbering: the
restore's answer told the head which calls those are. Only a live copy placed back with no
checkpoint written cannot tell it: there such a call takes its place, so a name may exceed
the calls the state has really seen (``count``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import dista_proto as dp
from dista_proto._head_records import ActorState

from .cluster import THRESHOLD, Sim, SimWorker

#: The capability the sims' actors are created with, and their handles carry.
CAPABILITY = bytes(range(16))
ACTOR_TYPE = 0xAC7
ADD = 1
RAISE = 2
#: A constructor argument that makes the constructor raise.
FAIL_CREATE = b"fail-create"
RAISED = "ValueError: the sim actor raised"
MASK = (1 << 64) - 1
STRETCH = THRESHOLD // 8 + 8  # copies of the 8-byte state in a stretched (stored) result


def u64(value: int) -> bytes:
    return struct.pack("<Q", value & MASK)


def from_u64(data: bytes) -> int:
    value: int = struct.unpack("<Q", bytes(data[:8]))[0]
    return value


def result_of(state: int, value: int) -> bytes:
    """A call's answer: the new state, stretched past the inline threshold for some values."""
    data = u64(state)
    return data * STRETCH if value % 4 == 0 else data


def answer_count(kinds: list[str] | None) -> int:
    """How many times the head answered an object, from a driver's decisions for it.

    After located, a value is the driver's own fetch (one per location), and a failure is
    a fetch that failed or the holder lost later (as for tasks' objects): not answers.
    An inline value or a failure is final: anything after it is an answer again.
    """
    if not kinds:
        return 0
    if kinds[0] == "located":
        located = kinds.count("located")
        return located + max(0, kinds.count("value") - located)
    return len(kinds)


@dataclass
class Snapshot:
    """An actor's state as one checkpoint holds it."""

    total: int
    count: int  # calls run
    last: dict[int, int]  # caller (driver number) -> its newest call ID run
    label: int = -1  # the calls it covers in the head's numbering (-1: ``count``)
    #: The answers of the calls it includes (they travel with it: a caller that lost one
    #: with a head gets it from the actor restored elsewhere).
    answers: dict[int, bytes | None] = field(default_factory=dict)
    #: Calls it includes that ran past a head's loss, not in the order yet (`Instance`).
    pending: list[tuple[int, int, bytes | None]] = field(default_factory=list)


@dataclass
class Instance:
    """A live sim actor in a worker's process."""

    actor_id: int
    total: int
    count: int = 0
    last: dict[int, int] = field(default_factory=dict)
    label: int = 0  # calls the head sent it, in its numbering (see the module docstring)
    #: The newest call per caller the checkpoint it was restored from includes.
    restored: dict[int, int] = field(default_factory=dict)
    head: object = None  # the head it was built for (or placed back by)
    answers: dict[int, bytes | None] = field(default_factory=dict)  # call ID -> its answer
    #: Its build of the actor (the checkpoint store's fence: a newer one makes it stale).
    incarnation: int = 0
    #: Calls run past its head's loss, not recorded in the order yet: (position, ID, answer).
    pending: list[tuple[int, int, bytes | None]] = field(default_factory=list)
    #: A call the state has counts in ``label`` (placed back with no checkpoint written).
    count_covered: bool = False

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.total,
            self.count,
            dict(self.last),
            self.label,
            dict(self.answers),
            list(self.pending),
        )


class SimActors:
    """The binding's side of actors for every worker of ``sim``, and the checkpoint store.

    ``failure_rate`` is the chance that a checkpoint write fails; ``failing``, when set,
    makes every write fail with that message (rule tests); ``restore_failure`` likewise
    makes restores fail.
    """

    def __init__(self, sim: Sim, failure_rate: float = 0.0) -> None:
        self.sim = sim
        sim.actor_runner = self.run
        sim.actor_exit = self._exit
        self.failure_rate = failure_rate
        self.failing: str | None = None
        self.restore_failure: str | None = None
        self.disk: dict[int, dict[int, Snapshot]] = {}  # actor -> calls covered -> state
        self.written: set[tuple[int, int]] = set()  # every (actor, calls) ever written
        self.order: dict[int, dict[int, int]] = {}  # actor -> position (from 1) -> call ID
        self.outcomes: dict[int, bytes | None] = {}  # call ID -> first answer (None: raised)
        self.runs: dict[int, int] = {}  # call ID -> times run
        self.starts: list[tuple[int, int | None]] = []  # (actor, covers) per StartActor run
        self.checkpoints: list[tuple[int, int, str | None]] = []  # (actor, calls, failure)
        self.stopped: list[int] = []
        #: (actor, the checkpoint it came from or None) per restore of the newest one.
        self.restored_newest: list[tuple[int, int | None]] = []
        self.restored_live: list[int] = []  # actors placed back where they live on
        self.fenced: list[int] = []  # stale live copies a new head tried to place back
        #: Per actor, the fences the store holds (removing its checkpoints removes them),
        #: each with the epoch of the head that numbered its build (0: none did).
        self.fences: dict[int, dict[int, int]] = {}
        self.covered_calls: list[int] = []  # calls not run: the restored state had them
        self.zombie_calls = 0  # calls run by an incarnation its head left behind
        self.unread = 0  # checkpoints written off the chain (a newer build began)
        #: Answers of calls run before a head restart, run again after it (`_redecide`).
        self.former: dict[int, list[bytes | None]] = {}
        self.positions: dict[int, int] = {}  # call ID -> its position in ``order``
        self.strays = 0  # calls and checkpoints for an actor not built on their worker

    def where(self) -> str:
        return f"seed {self.sim.seed}"

    def host(self, actor_id: int) -> SimWorker | None:
        """The live worker whose process hosts ``actor_id``, if any (at most one may)."""
        hosts = [
            w
            for w in self.sim.workers
            if w.alive and isinstance(w.hosted, Instance) and w.hosted.actor_id == actor_id
        ]
        assert len(hosts) <= 1, f"{self.where()}: actor {actor_id:#x} lives on {len(hosts)}"
        return hosts[0] if hosts else None

    def zombie(self, w: SimWorker) -> bool:
        """Whether the head has lost ``w`` while ``w`` does not know it yet."""
        pipe = self.sim.ends.get((id(w.core), dp.HEAD_LINK))
        if pipe is None or pipe.target is not self.sim.head:
            return True
        return self.sim.head.worker_address(pipe.link) != w.address

    def _left_behind(self, w: SimWorker, actor: int) -> bool:
        """Whether ``w``'s incarnation of ``actor`` was left behind by a head that lives on
        (it lost ``w``, which does not know yet), or moved on by the head there is now. An
        actor whose head restarted lives on: a new head places it back there."""
        pipe = self.sim.ends.get((id(w.core), dp.HEAD_LINK))
        if pipe is not None and pipe.target is self.sim.head and self.zombie(w):
            return True
        record = next((a for a in self.sim.head.actors() if a.actor_id == actor), None)
        if record is None:
            return False
        if record.state is ActorState.DEAD:
            return True
        return record.worker is not None and record.worker.address != w.address

    def superseded(self, w: SimWorker, actor: int) -> bool:
        """Whether the head no longer has ``actor`` on ``w`` (moved on, or ended)."""
        record = next((a for a in self.sim.head.actors() if a.actor_id == actor), None)
        if record is None or record.state is ActorState.DEAD or record.worker is None:
            return True
        return record.worker.address != w.address

    def run(self, w: SimWorker) -> None:
        """Run ``w``'s next piece of actor work and report it to its worker core."""
        work = w.actor_work.popleft()
        if isinstance(work, dp.StartActor):
            self._start(w, work)
        elif isinstance(work, dp.CallActor):
            self._call(w, work)
        elif isinstance(work, dp.CheckpointActor):
            self._checkpoint(w, work)
        else:
            assert isinstance(work, dp.StopActor)
            self._stop(w, work)
        self.sim._run_decisions(w.core)

    def run_all(self, w: SimWorker) -> None:
        """Run every piece of ``w``'s actor work (rule tests)."""
        while w.actor_work:
            self.run(w)

    def _start(self, w: SimWorker, work: dp.StartActor) -> None:
        actor = work.actor_id
        live = w.hosted
        if isinstance(live, Instance) and live.actor_id == actor:
            self._placed_back(w, live, work)
            return
        assert w.hosted is None, (
            f"{self.where()}: {w.address} builds actor {actor:#x} while hosting {w.hosted}"
        )
        self.starts.append((actor, work.covers))
        if work.covers is None:
            assert work.argument is not None
            if bytes(work.argument) == FAIL_CREATE:
                w.core.actors.actor_started(actor, "ValueError: the sim constructor raised")
                return
            w.hosted = Instance(actor, from_u64(bytes(work.argument)), head=self.sim.head)
            self._began(w.hosted, work, -1)
        else:
            if self.restore_failure is not None:
                w.core.actors.actor_started(actor, self.restore_failure)
                return
            kept = self.disk.get(actor, {})
            covers = work.covers
            if covers == dp.RESTORE_NEWEST:
                if not kept:
                    self.restored_newest.append((actor, None))
                    w.core.actors.actor_started(actor, "no checkpoint", no_checkpoint=True)
                    return
                covers = max(kept)
                self.restored_newest.append((actor, covers))
            snapshot = kept.get(covers)
            if snapshot is None and (self.zombie(w) or self.superseded(w, actor)):
                # Work the head sent before it lost this worker (silent, or cut off), or
                # moved the actor on: it lives elsewhere now, or is gone with its checkpoints.
                w.core.actors.actor_started(actor, "OSError: the sim's checkpoint is not there")
                return
            assert snapshot is not None, (
                f"{self.where()}: actor {actor:#x} restored from the checkpoint covering "
                f"{covers} calls, which "
                + ("was deleted" if (actor, covers) in self.written else "was never written")
                + f" (on disk: {sorted(kept)})"
            )
            label = snapshot.label if snapshot.label >= 0 else snapshot.count
            assert label == covers
            w.hosted = Instance(
                actor,
                snapshot.total,
                snapshot.count,
                dict(snapshot.last),
                label,
                dict(snapshot.last),
                self.sim.head,
                dict(snapshot.answers),
            )
            self._began(w.hosted, work, label)
            for count, oid, outcome in snapshot.pending:  # (restored: they count now)
                self._record(w.hosted, count, oid, outcome)
            if work.covers == dp.RESTORE_NEWEST:
                newest = dict(snapshot.last)
                w.core.actors.actor_started(actor, None, covers=covers, newest=newest)
                return
        w.core.actors.actor_started(actor, None)

    def _began(self, inst: Instance, work: dp.StartActor, base: int) -> None:
        """A new build of the actor from the checkpoint covering ``base`` calls (-1: none):
        it fences off every build its heads asked for before it (as `CheckpointStore.begin`
        orders them: a head's rank in the folder, then the build number it gave; without
        one, after every fence there is), and what those wrote past ``base`` is off its
        chain: never read again."""

        fences = self.fences.setdefault(inst.actor_id, {})
        top = max(fences, default=0)
        if work.build:
            ranks = [i >> 32 for i, epoch in fences.items() if i >> 32 and epoch == work.epoch]
            rank = min(ranks) if ranks else (top >> 32) + 1
            inst.incarnation = rank << 32 | work.build
        else:
            inst.incarnation = top + 1
        assert inst.incarnation not in fences, f"{self.where()}: build numbered twice"
        fences[inst.incarnation] = work.epoch
        kept = self.disk.get(inst.actor_id)
        if kept and inst.incarnation == max(fences):  # (a late build of a head before: no)
            for calls in [c for c in kept if c > base]:
                del kept[calls]

    def _stale(self, inst: Instance, *, writing: bool = False) -> bool:
        """Whether ``inst`` is a stale copy: its fence is gone (the actor was killed and its
        checkpoints removed: the store refuses its writes), or, placing it back, a newer
        build's fence is there."""
        fences = self.fences.get(inst.actor_id, {})
        if inst.incarnation not in fences:
            return True
        return not writing and inst.incarnation < max(fences)

    def _placed_back(self, w: SimWorker, inst: Instance, work: dp.StartActor) -> None:
        """A new head places the actor back on the worker where it lives on (it lost its
        head link, not its process): answered from the live state, which a checkpoint
        covering what it has seen makes the restore point (none if it cannot be written)."""
        assert work.covers == dp.RESTORE_NEWEST, (
            f"{self.where()}: actor {inst.actor_id:#x} built again over its live instance"
        )
        if self._stale(inst):
            # Built again elsewhere since (a head before lost this worker), or killed and
            # its checkpoints removed: stale.
            self.fenced.append(inst.actor_id)
            w.core.actors.actor_started(inst.actor_id, "fenced off by a newer build", fenced=True)
            return
        self._began(inst, work, inst.label)  # it goes on as a build of the head there
        inst.head = self.sim.head
        inst.restored = dict(inst.last)  # resent calls it ran are answered, not run
        pending, inst.pending = inst.pending, []
        for count, oid, outcome in pending:  # what it ran past its head's loss counts now
            self._record(inst, count, oid, outcome)
        failure = self.failing
        if failure is None and self.failure_rate and self.sim.rng.random() < self.failure_rate:
            failure = "OSError: the sim's disk is full"
        self.restored_live.append(inst.actor_id)
        if failure is None:
            self.disk.setdefault(inst.actor_id, {})[inst.label] = inst.snapshot()
            self.written.add((inst.actor_id, inst.label))
        # With a store, the head is told which calls the state has (it numbers none).
        told = dict(inst.last) if w.has_store else None
        inst.count_covered = told is None
        w.core.actors.actor_started(
            inst.actor_id, None, covers=inst.label, uncovered=failure is not None, newest=told
        )

    def _redecide(self, actor: int, position: int) -> None:
        """A head restarted: the calls from ``position`` on, which the state it restored
        did not have, are numbered again in the order the drivers resend them, which may
        interleave callers otherwise than before (each caller's own order stays)."""
        order = self.order.get(actor, {})
        for later in [p for p in order if p >= position]:
            oid = order.pop(later)
            self.positions.pop(oid, None)
            if oid in self.outcomes:
                self.former.setdefault(oid, []).append(self.outcomes.pop(oid))

    def _call(self, w: SimWorker, work: dp.CallActor) -> None:
        sim = self.sim
        oid = work.object_id
        inst = w.hosted
        started = sim.now
        if not isinstance(inst, Instance) or inst.actor_id != work.actor_id:
            # Its constructor failed (the call came before the head knew): not run.
            self.strays += 1
            w.core.task_failed(
                oid, f"actor {work.actor_id:#x} is not built here", started, started
            )
            return
        caller = oid >> dp.ID_BITS
        if oid <= inst.restored.get(caller, 0):
            # The state it was restored from (or lives on with) includes this call: not
            # run again, answered as it was if the answer is kept. It takes no place in
            # the order, unless the head was not told which calls the state has.
            if inst.count_covered:
                inst.label += 1
            self.covered_calls.append(oid)
            if oid not in inst.answers:
                w.core.call_covered(oid)
            elif inst.answers[oid] is None:
                w.core.task_failed(oid, RAISED, started, started)
            else:
                w.core.task_done(oid, [inst.answers[oid] or b""], started, started)
            return
        last = inst.last.get(caller, 0)
        assert oid > last, (
            f"{self.where()}: actor {inst.actor_id:#x} ran call {oid:#x} of driver {caller} "
            f"after its call {last:#x}: out of the order it sent them (or twice)"
        )
        inst.last[caller] = oid
        inst.count += 1
        inst.label += 1
        value = from_u64(bytes(work.argument))
        if self._left_behind(w, inst.actor_id):
            # The work of an incarnation its head has left behind (it lost this worker,
            # and the actor lives elsewhere): its answers go nowhere.
            if work.method_id != RAISE:
                inst.total = (inst.total + value) & MASK
            outcome = result_of(inst.total, value) if work.method_id != RAISE else None
            inst.answers[oid] = outcome
            inst.pending.append((inst.count, oid, outcome))  # (counts if placed back)
            self.zombie_calls += 1
            w.core.task_done(oid, [b""], started, started)
            return
        outcome: bytes | None
        if work.method_id == RAISE:
            outcome = None
        else:
            inst.total = (inst.total + value) & MASK
            outcome = result_of(inst.total, value)
        inst.answers[oid] = outcome
        if inst.head is not sim.head:
            # Run on past its head's loss: its place in the order counts only if a new head
            # places this instance back (another may be the live one; this one then goes).
            inst.pending.append((inst.count, oid, outcome))
        else:
            self._record(inst, inst.count, oid, outcome)
        self.runs[oid] = self.runs.get(oid, 0) + 1
        sim.now += sim.rng.randrange(1, 100)
        if outcome is None:
            w.core.task_failed(oid, RAISED, started, sim.now)
        else:
            w.core.task_done(oid, [outcome], started, sim.now)

    def _record(self, inst: Instance, count: int, oid: int, outcome: bytes | None) -> None:
        """Call ``oid`` ran at position ``count`` of ``inst``'s actor, answering ``outcome``."""
        order = self.order.setdefault(inst.actor_id, {})
        at = order.setdefault(count, oid)
        was = self.positions.setdefault(oid, count)
        if (at != oid or was != count) and (
            any(a == inst.actor_id for a, _ in self.restored_newest)
            or self._unseen_from(inst.actor_id, min(count, was))
        ):
            # Numbered again after a head restart (it, or another call, at a new place); or
            # the calls run there before left no trace (no answer reached a driver, no
            # checkpoint holds them: their incarnation was dropped), so any order is one.
            self._redecide(inst.actor_id, min(count, was))
            at = order[count] = oid
            self.positions[oid] = count
        assert at == oid, (
            f"{self.where()}: actor {inst.actor_id:#x}'s call {count} was {at:#x}, "
            f"and is {oid:#x} now"
        )
        first = self.outcomes.setdefault(oid, outcome)
        assert first == outcome, (
            f"{self.where()}: call {oid:#x} answered differently when run again"
        )

    def _unseen_from(self, actor: int, position: int) -> bool:
        """Whether no call recorded at ``position`` or later of ``actor`` was seen: its
        answer reached no driver, and no checkpoint on disk includes it."""
        if any(snap.count >= position for snap in self.disk.get(actor, {}).values()):
            return False
        outcomes = self.outcomes
        for at, oid in self.order.get(actor, {}).items():
            if at >= position and oid in outcomes and self._answered(oid, outcomes[oid]):
                return False
        return True

    def _answered(self, oid: int, outcome: bytes | None) -> bool:
        """Whether a driver holds ``outcome`` as call ``oid``'s answer (``None``: it raised,
        and a driver was told so; a driver that got nothing holds no answer)."""
        for d in self.sim.drivers:
            if outcome is None and RAISED in d.failed.get(oid, ""):
                return True
            if outcome is not None and d.got.get(oid) == outcome:
                return True
        return False

    def _checkpoint(self, w: SimWorker, work: dp.CheckpointActor) -> None:
        actor = work.actor_id
        inst = w.hosted
        if not isinstance(inst, Instance) or inst.actor_id != actor:
            self.strays += 1
            w.core.actors.checkpointed(actor, work.calls, f"actor {actor:#x} is not built here")
            return
        assert inst.label == work.calls, (
            f"{self.where()}: the checkpoint of actor {actor:#x} said to cover {work.calls} "
            f"calls comes after {inst.label} calls were sent ({inst.count} ran)"
        )
        failure = self.failing
        if failure is None and self.failure_rate and self.sim.rng.random() < self.failure_rate:
            failure = "OSError: the sim's disk is full"
        if failure is None and self._stale(inst, writing=True):
            failure = "fenced off: a newer build of the actor began, or it was removed"
        self.checkpoints.append((actor, work.calls, failure))
        if failure is None and self._stale(inst):
            # A newer build began (this copy is one a head left behind): the store keeps
            # the file under this build's name, off the chain, and never reads it.
            self.unread += 1
        elif failure is None:
            kept = self.disk.setdefault(actor, {})
            snapshot = inst.snapshot()
            had = kept.get(work.calls)
            assert had is None or (had.total, had.count, had.last) == (
                snapshot.total,
                snapshot.count,
                snapshot.last,
            ), (
                f"{self.where()}: actor {actor:#x}'s checkpoint covering {work.calls} calls "
                f"was written again with another state ({had} then {snapshot})"
            )
            kept[work.calls] = snapshot
            self.written.add((actor, work.calls))
            for calls in list(kept):
                # Only what is older than the restore point the frame names goes: a
                # checkpoint written meanwhile may be (or become) the head's restore point.
                if work.keep is not None and calls < work.keep:
                    del kept[calls]
        w.core.actors.checkpointed(actor, work.calls, failure)

    def _exit(self, w: SimWorker) -> None:
        """``w`` exits: the actors killed there lose their checkpoints first (as a worker
        process finishes removing them before it exits)."""
        for work in w.actor_work:
            if isinstance(work, dp.StopActor) and work.forget:
                self.stopped.append(work.actor_id)
                self.disk.pop(work.actor_id, None)
                self.fences.pop(work.actor_id, None)

    def _stop(self, w: SimWorker, work: dp.StopActor) -> None:
        inst = w.hosted
        if isinstance(inst, Instance) and inst.actor_id == work.actor_id:
            w.hosted = None  # (dropped, moved on or stale: a newer build fences it off)
        self.stopped.append(work.actor_id)
        if work.forget:
            self.disk.pop(work.actor_id, None)
            self.fences.pop(work.actor_id, None)

    # -- invariants ----------------------------------------------------------------------

    def check_restore_points(self) -> None:
        """The checkpoint each live actor would restore from now is on disk: the head must
        never count on one a later write removed."""
        for actor in self.sim.head.actors():
            if actor.state is ActorState.DEAD or actor.covered < 0:
                continue
            kept = self.disk.get(actor.actor_id, {})
            assert actor.covered in kept, (
                f"{self.where()}: the head would restore actor {actor.actor_id:#x} from the "
                f"checkpoint covering {actor.covered} calls, but the disk has {sorted(kept)}"
            )
