"""Which workers may run what: registries, and the by-value queue of each.

A worker runs the tasks of drivers whose registry hash equals its own (it imports their
modules), and, once both said which tasks they import (Dista's task-names frame,
`Registries`), of drivers whose tasks are a subset of its own: the workers of registry W
serve registry R when R's names are all among W's. Serving is a property of registries, not
of single workers (a registry hash is the hash of its names), so the scheduler keeps one
idle deque per worker registry and pumps, for it, the queues of every registry it serves. By-value tasks and actors (code that travels pickled: a script's functions, a
notebook's classes) are not bound to a registry by their task ID, so they are keyed by
their driver's registry with the `BY_VALUE` bit set (`by_value_key`): they run on workers
of that registry, or on workers that opted in to by-value code of any registry
(`HELLO_ANY_REGISTRY`, ``dista worker --accept-by-value``). So one team's script cannot run
its code on another team's workers.
"""

from __future__ import annotations

from typing import Final

from ._conventions import TASK_ID_MASK
from ._fairqueue import FairQueue
from ._head_records import TaskRecord

__all__ = ["BY_VALUE", "Registries", "by_value_key", "home_registry", "oldest", "unrunnable"]

#: The bit above a registry hash (a u64) that keys its by-value queue.
BY_VALUE: Final = 1 << 64


def by_value_key(registry: int) -> int:
    """The queue key of by-value tasks (and actors) of drivers of ``registry``."""
    return registry | BY_VALUE


def home_registry(key: int) -> int:
    """The registry a queue key belongs to (itself, or a by-value key's)."""
    return key & ~BY_VALUE


def unrunnable(task_id: int, key: int, grace_ns: int, lacking: str = "") -> str:
    """Why a task queued under ``key`` fails after the no-worker grace, naming the fix
    (``lacking``: what the closest workers lack, `Registries.closest`)."""
    waited = f"waited {grace_ns / 1e9:g} s for one"
    name = f"task {task_id & TASK_ID_MASK:#x}"
    if key >= BY_VALUE:
        return (
            f"no worker may run by-value {name}: by-value code runs only on workers of its "
            f"driver's registry {home_registry(key):#018x} or on workers started with "
            f"--accept-by-value, and none is connected ({waited}): start workers importing "
            "the same modules as the driver, or with --accept-by-value"
        )
    return (
        f"no worker can run {name}: none of the connected workers has this driver's "
        f"registry {key:#018x} ({waited}){lacking}"
    )


def oldest(
    queues: list[FairQueue[TaskRecord] | None],
) -> tuple[TaskRecord | None, FairQueue[TaskRecord] | None]:
    """The task queued first among the heads of ``queues``, and its queue (the first
    queue's on a tie)."""
    best: TaskRecord | None = None
    source = None
    for queue in queues:
        task = queue.peek() if queue is not None else None
        if task is not None and (best is None or task.queued < best.queued):
            best, source = task, queue
    return best, source


class Registries:
    """Which registries' workers serve which registries' drivers, from the task names peers
    sent (`TaskNames`). The first names heard for a registry are its names (its hash is the
    hash of its names: a second peer of the registry sends the same), kept while a peer
    that sent them is connected."""

    def __init__(self) -> None:
        self.names_of: dict[int, frozenset[int]] = {}
        self._senders: dict[int, int] = {}  # registry -> connected peers that sent names
        #: Worker registry -> the other registries whose drivers its workers serve.
        self.serves: dict[int, set[int]] = {}
        #: Registry -> the other registries whose workers serve its drivers.
        self.servers: dict[int, set[int]] = {}

    def learn(self, registry: int, names: frozenset[int]) -> list[tuple[int, int]]:
        """A peer of ``registry`` imports ``names``: the (worker registry, served registry)
        pairs this makes, new."""
        self._senders[registry] = self._senders.get(registry, 0) + 1
        if registry in self.names_of:
            return []
        self.names_of[registry] = names
        pairs = []
        for other, theirs in self.names_of.items():
            if other == registry:
                continue
            # A driver importing no task at all is nobody's: its by-value code runs only on
            # its own registry's workers, or those accepting any (the page's rule).
            if names and names <= theirs:
                pairs.append((other, registry))
            if theirs and theirs <= names:
                pairs.append((registry, other))
        for server, served in pairs:
            self.serves.setdefault(server, set()).add(served)
            self.servers.setdefault(served, set()).add(server)
        return pairs

    def left(self, registry: int) -> None:
        """A peer of ``registry`` that sent names is gone; with the last, its names go."""
        count = self._senders.get(registry, 0) - 1
        if count > 0:
            self._senders[registry] = count
            return
        self._senders.pop(registry, None)
        if self.names_of.pop(registry, None) is None:
            return
        for served in self.serves.pop(registry, ()):
            self._unlink(self.servers, served, registry)
        for server in self.servers.pop(registry, ()):
            self._unlink(self.serves, server, registry)

    @staticmethod
    def _unlink(table: dict[int, set[int]], key: int, gone: int) -> None:
        found = table.get(key)
        if found is not None:
            found.discard(gone)
            if not found:
                del table[key]

    def may_serve(self, server: int, registry: int) -> bool:
        """Whether workers of registry ``server`` run tasks of ``registry``'s drivers."""
        return server == registry or registry in self.serves.get(server, ())

    def closest(self, registry: int, candidates: set[int]) -> str:
        """What the workers closest to serving ``registry`` lack, said for its tasks' error
        ('' without names): the registry among ``candidates`` (those with workers) missing
        the fewest of its names, and which (task IDs, the driver names their modules)."""
        names = self.names_of.get(registry)
        if names is None:
            return ""
        best: tuple[int, int, list[int]] | None = None
        for other in sorted(candidates):
            theirs = self.names_of.get(other)
            if theirs is None or other == registry:
                continue
            missing = sorted(names - theirs)
            if best is None or len(missing) < best[0]:
                best = (len(missing), other, missing)
        if best is None:
            return ""
        _, other, missing = best
        shown = ", ".join(f"{name:#x}" for name in missing[:_SHOWN])
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        return f"; the workers of registry {other:#018x} lack tasks {shown}{more}"


#: How many missing tasks an error names.
_SHOWN: Final = 8
