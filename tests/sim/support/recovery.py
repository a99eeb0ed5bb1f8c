"""Recovery faults for the simulated cluster, and the clock they need.

`RecoverySim` is `Sim` with time that passes: the head's and the workers' timers
(`next_deadline` / `on_timer`: heartbeats, liveness, claims, holdings and limbo waiting out
their grace) and the sim's own (a machine connecting again after a delay, a silent link
speaking again) fire when their time comes. Time jumps to the next deadline when nothing
else can move, and now and then while bytes are still on their way (a timer racing the
traffic). Its faults, each one call:

* `restart_head`: the head is replaced by a new `dp.Head` (new epoch, new first number);
  every link to the old one breaks, bytes on their way are lost, and every driver and
  worker connects to the new head after a random delay and calls ``start`` again (drivers
  resume, workers rejoin with holding).
* `cut` (a worker's or driver's head link): both directions end (a reset drops the bytes on
  their way, a close delivers them first); the machine connects to the same head again.
* `silence`: a worker's head link stops moving bytes both ways for a while, then moves them
  again; the head, whose liveness timeout passes meanwhile, loses the worker and closes the
  link, which the worker notices once the link moves again: it rejoins.
* `drain`: a worker is told to stop (``Worker.drain``); it leaves once the head says stop.

A worker that exits (`Exit`: told to stop) is gone: its object server with it. With
``manual`` set (rule tests), a machine that lost its head waits in `lost` for the test to
`reconnect` it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import dista_proto as dp

from .cluster import Pipe, Sim, SimDriver, SimWorker

MS = 1_000_000
#: The sim's head loses a worker silent this long; workers beat four times as often.
LIVENESS_NS = 40 * MS
HEARTBEAT_NS = 10 * MS
#: Claims, holdings and a silent worker's objects wait this long.
GRACE_NS = 200 * MS
#: A machine that lost its head connects again within this (well inside the grace).
MAX_DELAY_NS = 20 * MS


class RecoverySim(Sim):
    def __init__(
        self,
        seed: int,
        *,
        liveness_ns: int = LIVENESS_NS,
        recovery_grace_ns: int = GRACE_NS,
        heartbeat_ns: int = HEARTBEAT_NS,
        jump_rate: float = 0.02,
        max_retries: int = 1000,
        **kwargs: object,
    ) -> None:
        super().__init__(
            seed,
            liveness_ns=liveness_ns,
            recovery_grace_ns=recovery_grace_ns,
            heartbeat_ns=heartbeat_ns,
            **kwargs,  # type: ignore[arg-type]
        )
        # Faults are not crashes: a task may lose its worker many times and still answer.
        self.head.max_retries = max_retries
        self.jump_rate = jump_rate
        self.timers: list[tuple[int, int, str, Callable[[], None]]] = []
        self._timer_seq = 0
        #: A silent worker's head link: its two pipes, out of `pipes` until it speaks again.
        self.frozen: dict[int, list[Pipe]] = {}
        self.heads = [self.head]  # every head so far (so that no id() is ever reused)
        self.log: list[str] = []  # faults and timers, for failure messages
        self.away: set[int] = set()  # id() of cores waiting to connect again
        self.dead: set[int] = set()  # id() of drivers that died
        self.restarts = 0
        self.silenced = 0
        self.cuts = 0
        self.drains = 0
        self.exits: list[SimWorker] = []
        #: Rule tests: machines that lost their head wait here for `reconnect`.
        self.manual = False
        self.lost: list[dp.Worker | dp.Driver] = []

    def where(self) -> str:
        return f"seed {self.seed}"

    def note(self, what: str) -> None:
        self.log.append(f"t={self.now}: {what}")

    # -- time ------------------------------------------------------------------------------

    def after(self, delay: int, what: str, action: Callable[[], None]) -> None:
        self._timer_seq += 1
        heapq.heappush(self.timers, (self.now + delay, self._timer_seq, what, action))

    def next_time(self) -> int | None:
        times = []
        if self.timers:
            times.append(self.timers[0][0])
        deadline = self.head.next_deadline()
        if deadline is not None:
            times.append(deadline)
        beats = (w.core.next_deadline() for w in self.workers if w.alive)
        times.extend(beat for beat in beats if beat is not None)
        return min(times) if times else None

    def jump(self) -> bool:
        """Let time pass to the next deadline and fire what is due; False if none."""
        at = self.next_time()
        if at is None:
            return False
        self.now = max(self.now, at)
        self.fire()
        return True

    def fire(self) -> None:
        now = self.now
        while self.timers and self.timers[0][0] <= now:
            _, _, what, action = heapq.heappop(self.timers)
            self.note(what)
            action()
        head = self.head
        deadline = head.next_deadline()
        if deadline is not None and deadline <= now:
            head.on_timer(now)
            self._run_decisions(head)
        for w in list(self.workers):
            beat = w.core.next_deadline() if w.alive else None
            if beat is not None and beat <= now:
                w.core.on_timer(now)
                self._run_decisions(w.core)

    def waiting(self) -> bool:
        """Whether something happens once time passes (beyond heartbeats and ticks)."""
        head = self.head
        return bool(
            self.timers
            or self.frozen
            or head._holdings.claims
            or head._holdings.unclaimed
            or head._holdings.limbo
            or head._resume.away
            or head._resume.parked
            or head._scheduler.next_deadline() is not None
            or head._actors.next_deadline() is not None
            # A fetch waiting for a grant lost with a head link: refused in time (retried).
            or any(w.alive and w.core._gate._waiting for w in self.workers)
        )

    def step(self) -> bool:
        if self.rng.random() < self.jump_rate and self.jump():
            return True
        if super().step():
            return True
        return self.waiting() and self.jump()

    # -- machines that come and go ---------------------------------------------------------

    def _name(self, core: object) -> str:
        machine = self._machine(core)
        if isinstance(machine, SimWorker):
            return f"worker {machine.address}"
        if isinstance(machine, SimDriver):
            return f"driver {machine.index}"
        return "head" if isinstance(core, dp.Head) else "?"

    def head_lost(self, core: object) -> None:
        machine = self._machine(core)
        if machine is None or (isinstance(machine, SimWorker) and not machine.alive):
            return
        if id(core) in self.away or id(core) in self.dead:
            return
        if self.manual:
            assert isinstance(core, (dp.Worker, dp.Driver))
            self.lost.append(core)
            return
        self.away.add(id(core))
        delay = self.rng.randrange(0, MAX_DELAY_NS)
        self.note(f"{self._name(core)} lost its head; connects again in {delay} ns")
        self.after(delay, f"{self._name(core)} connects again", lambda: self.reconnect(core))

    def disconnect(self, d: SimDriver) -> None:
        """A driver process dies (for good: it never connects again)."""
        self.dead.add(id(d.core))
        super().disconnect(d)

    def reconnect(self, core: object) -> None:
        self.away.discard(id(core))
        if id(core) in self.dead:
            return
        if core in self.lost:
            self.lost.remove(core)  # type: ignore[arg-type]
        machine = self._machine(core)
        if machine is None or (isinstance(machine, SimWorker) and not machine.alive):
            return
        assert isinstance(core, (dp.Worker, dp.Driver))
        self._connect_to_head(core)
        core.start(self.now)
        self._run_decisions(core)

    def exited(self, core: object) -> None:
        """A worker told to stop ends: its links close once their bytes are out."""
        machine = self._machine(core)
        if not isinstance(machine, SimWorker) or not machine.alive:
            return
        self.note(f"worker {machine.address} exits")
        if self.actor_exit is not None:
            self.actor_exit(machine)
        machine.alive = False
        machine.running.clear()
        machine.blocked.clear()
        machine.actor_work.clear()
        machine.hosted = None
        self.exits.append(machine)
        self.frozen.pop(id(core), None)
        for pipe in list(self.pipes):
            if pipe.target is core:
                self.pipes.remove(pipe)
        for (owner, link), pipe in list(self.ends.items()):
            if owner == id(core):
                del self.ends[(owner, link)]
                pipe.closed = True

    def _cancel_task(self, w: SimWorker, decision: dp.CancelTask) -> None:
        if decision.object_id not in w.core._jobs:
            # The head went: the worker dropped its tasks (their answers would be dropped).
            w.running = [t for t in w.running if t.object_id != decision.object_id]
            w.blocked.discard(decision.object_id)
            return
        super()._cancel_task(w, decision)

    # -- faults ----------------------------------------------------------------------------

    def restart_head(self, first_number: int = 0) -> dp.Head:
        """The head dies and a new one (another epoch) takes its address."""
        old = self.head
        self.restarts += 1
        epoch = old.epoch + 1 + self.rng.randrange(1 << 20)
        new = dp.Head(
            epoch=epoch,
            first_number=first_number or self.rng.randrange(1, 1 << 24),
            worker_slots=old.worker_slots,
            prefetch=old.prefetch,
            max_retries=old.max_retries,
            liveness_ns=old.liveness_ns,
            recovery_grace_ns=old.recovery_grace_ns,
            actor_keep_bytes=old.actor_keep_bytes,
            no_worker_grace_ns=old.no_worker_grace_ns,
            idle_ns=old.watch.idle_ns,
        )
        self.note(f"the head restarts (epoch {epoch:#x})")
        self.heads.append(new)
        self.head = new
        for held in self.frozen.values():
            held[:] = [p for p in held if p.target is not old]
        self.crash_machine(old)
        return new

    def _head_pipes(self, core: object) -> tuple[Pipe | None, Pipe | None]:
        """The pipes of ``core``'s head link: (to the head, from the head)."""
        to_head = self.ends.get((id(core), dp.HEAD_LINK))
        from_head = None
        for (owner, _), pipe in self.ends.items():
            if pipe.target is core and pipe.link == dp.HEAD_LINK and owner == id(self.head):
                from_head = pipe
        if from_head is None:
            for held in self.frozen.values():
                for pipe in held:
                    if pipe.target is core and pipe.link == dp.HEAD_LINK:
                        from_head = pipe
        return to_head, from_head

    def cut(self, core: dp.Worker | dp.Driver, reset: bool, head_sees: bool = True) -> bool:
        """``core``'s head link breaks both ways (``reset``: bytes on their way are lost);
        with ``head_sees`` False only ``core`` notices (the head's side stays half open)."""
        to_head, from_head = self._head_pipes(core)
        if to_head is None or from_head is None or to_head.closed or from_head.closed:
            return False
        self.cuts += 1
        self.note(f"{self._name(core)}'s head link is {'reset' if reset else 'closed'}")
        broken = (to_head, from_head) if head_sees else (from_head,)
        for key, pipe in list(self.ends.items()):
            if any(pipe is b for b in broken):
                del self.ends[key]
        for pipe in broken:
            pipe.closed = True
            if reset:
                pipe.chunks.clear()
        return True

    def silence(self, w: SimWorker, duration: int) -> bool:
        """``w``'s head link moves nothing either way for ``duration`` ns."""
        if id(w.core) in self.frozen or not w.alive:
            return False
        to_head, from_head = self._head_pipes(w.core)
        if to_head is None or from_head is None or to_head.closed or from_head.closed:
            return False
        self.silenced += 1
        self.note(f"worker {w.address} goes silent for {duration} ns")
        held = [to_head, from_head]
        self.pipes = [p for p in self.pipes if p is not to_head and p is not from_head]
        self.frozen[id(w.core)] = held
        self.after(duration, f"worker {w.address} speaks again", lambda: self._thaw(w))
        return True

    def _thaw(self, w: SimWorker) -> None:
        held = self.frozen.pop(id(w.core), [])
        if w.alive:
            self.pipes.extend(p for p in held if p not in self.pipes)

    def add_driver(self) -> SimDriver:
        """A new driver connects to the head (it says hello: run `settle` for its welcome)."""
        d = SimDriver(self, len(self.drivers))
        self.drivers.append(d)
        self._connect_to_head(d.core)
        d.core.start(self.now)
        self._run_decisions(d.core)
        return d

    def drain(self, w: SimWorker) -> None:
        self.drains += 1
        self.note(f"worker {w.address} drains")
        w.core.drain(self.now)
        self._run_decisions(w.core)

    def joined(self, w: SimWorker) -> bool:
        """Whether ``w`` is up and its head link is too (not silent, not reconnecting)."""
        return (
            w.alive
            and not w.core.stopped
            and id(w.core) not in self.away
            and id(w.core) not in self.frozen
            and (id(w.core), dp.HEAD_LINK) in self.ends
        )
