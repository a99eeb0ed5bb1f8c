"""The head's status text, as `dista status` prints it (the format is in docs/protocol.md).

Besides the counts, it says why work waits where it can: a registry no worker has, tasks
queued where every worker hosts an actor (an actor takes a whole worker), an actor that
waits (`Placement`'s reason), and per worker whether it has a checkpoint store (only
such a worker restores an actor)."""

from __future__ import annotations

from collections.abc import Iterable

from ._events import HeadStats
from ._head_labels import LabelTable
from ._head_records import ActorRecord, ActorState, Peer
from ._head_registries import BY_VALUE, home_registry
from ._head_scheduling import Scheduler
from ._head_wire import Wire
from ._roles import Role

__all__ = ["status_text"]

#: A registry's line names this many of its tasks.
_TASKS_SHOWN = 4


def status_text(
    wire: Wire, stats: HeadStats, scheduler: Scheduler, actors: Iterable[ActorRecord]
) -> str:
    peers = list(wire.peers.values())
    drivers = [p for p in peers if p.role in (Role.DRIVER, Role.CLIENT)]
    workers = [p for p in peers if p.role == Role.WORKER]
    observers = sum(1 for p in peers if p.role == Role.OBSERVER)
    clients = sum(1 for p in drivers if p.role == Role.CLIENT)
    blocked = sum(w.blocked for w in workers)
    lines = [
        f"dista head: epoch {wire.epoch:#x}{' (stopping)' if wire.stopping else ''}",
        (
            f"drivers: {len(drivers) - clients}  clients (tasks' sessions): {clients}  "
            f"workers: {len(workers)}  observers: {observers}"
        ),
        (
            f"objects: {stats.objects}  held bytes: {stats.held_bytes}  "
            f"pending: {stats.pending}  running: {stats.running} (blocked in get: {blocked})"
        ),
    ]
    registries = {p.registry for p in drivers} | {p.registry for p in workers}
    for registry in sorted(registries):
        # Its own workers, and those whose registry serves it (`Registries`: task-names).
        serving = [w for w in workers if scheduler.may_run(w, registry) and not w.draining]
        queued = scheduler.queued(registry)
        users = sum(1 for d in drivers if d.registry == registry and d.role == Role.DRIVER)
        line = (
            f"registry {registry:#018x}: drivers {users}, workers {len(serving)}, queued {queued}"
            + _tasks_of(registry, scheduler, wire.labels)
        )
        if users and not serving:
            line += (
                "  NO WORKER has this registry: its tasks wait, then fail "
                "(start workers that import its task modules)"
            )
        elif queued and serving and all(w.actor is not None for w in serving):
            line += f"  {_held_by_actors(registry, serving)}"
        lines.append(line)
    accepting = sorted(str(w.address) for w in workers if w.any_registry and not w.draining)
    lines.append(
        "by-value code (tasks and actor classes sent pickled) runs on workers of its driver's "
        f"registry and on workers accepting any: {', '.join(accepting) or 'none'}"
    )
    for key in sorted(k for k in scheduler.ready if k >= BY_VALUE):
        if scheduler.queued(key):
            registry = home_registry(key)
            line = f"by-value tasks of registry {registry:#018x}: queued {scheduler.queued(key)}"
            hosts = [
                w for w in workers if (w.registry == registry or w.any_registry) and not w.draining
            ]
            if hosts and all(w.actor is not None for w in hosts):
                line += f"  {_held_by_actors(registry, hosts)}"
            lines.append(line)
    for worker in sorted(workers, key=lambda w: str(w.address)):
        state = "draining" if worker.draining else "ready"
        if worker.draining and worker.why:
            state += f" ({worker.why})"  # what its drain waits for
        if worker.actor is not None:
            actor = worker.actor
            kept = actor.state is ActorState.WAITING  # (a busy worker kept for it)
            state += f", {'kept for' if kept else 'hosts'} actor {actor.actor_id:#x}"
            label = wire.labels.get(actor.type_id)
            state += f" ({label})" if label else ""
        busy = len(worker.running)
        store = "checkpoint store" if worker.checkpoints else "no checkpoint store"
        lines.append(
            f"worker {worker.address}: {state}, running {busy} (blocked {worker.blocked}), "
            f"holding {len(worker.holds)}, registry {worker.registry:#018x}, {store}"
            + _process(worker)
        )
    lines.extend(actor_lines(actors, wire.labels))
    for driver in sorted(drivers, key=lambda d: d.number):
        kind = "client" if driver.role == Role.CLIENT else "driver"
        where = f", from {driver.host}" if driver.host else ""
        lines.append(
            f"{kind} {driver.number}: registry {driver.registry:#018x}{where}{_process(driver)}"
        )
    return "\n".join(lines) + "\n"


def _tasks_of(registry: int, scheduler: Scheduler, labels: LabelTable) -> str:
    """What a registry is, for people: the tasks its peers import, by name (task-names and
    the drivers' labels), the first few."""
    names = scheduler.registries.names_of.get(registry)
    known = sorted(label for n in names or () if (label := labels.get(n)) is not None)
    if not known:
        return ""
    more = f", +{len(known) - _TASKS_SHOWN}" if len(known) > _TASKS_SHOWN else ""
    return f", tasks {', '.join(known[:_TASKS_SHOWN])}{more}"


def _process(peer: Peer) -> str:
    """A peer's process, as its vitals said (memory in MiB)."""
    return f", pid {peer.pid}, {peer.rss / (1 << 20):.0f} MiB" if peer.pid else ""


def _held_by_actors(registry: int, workers: list[Peer]) -> str:
    """Why tasks queued for ``workers`` (each hosting an actor, or kept for one) wait."""
    return (
        f"every worker of registry {registry:#018x} hosts an actor ({len(workers)} actors): "
        "its tasks wait: start another worker"
    )


def actor_lines(actors: Iterable[ActorRecord], labels: LabelTable) -> list[str]:
    """One line per live actor: where, its calls, its newest checkpoint, or why it waits."""
    lines = []
    for actor in sorted(actors, key=lambda a: a.actor_id):
        if actor.state is ActorState.DEAD:
            continue
        name = f"actor {actor.actor_id:#x} (type {labels.name(actor.type_id)})"
        if actor.state is ActorState.WAITING:
            lines.append(f"{name}: WAITING: {actor.why}; {actor.seq} calls queued")
            continue
        worker = actor.worker
        where = worker.address if worker is not None else "?"
        checkpoint = (
            f"last checkpoint covers {actor.covered} calls ({actor.checkpoints} written)"
            if actor.covered >= 0
            else "no checkpoint yet"
        )
        line = (
            f"{name}: {actor.state.name.lower()} on worker {where}, calls {actor.seq} "
            f"(unanswered {len(actor.by_oid)}), {checkpoint}, kept {len(actor.calls)} calls "
            f"({actor.kept_bytes} bytes), restarts {actor.restarts}"
        )
        if actor.failure:
            line += f"  CHECKPOINTS FAIL: {actor.failure}"
        if actor.lossy:
            line += "  (calls were cut past the budget: it cannot be rebuilt)"
        lines.append(line)
    return lines
