"""Which workers may run what: registries, and the by-value queue of each.

A worker runs the tasks of drivers whose registry hash equals its own (it imports their
modules). By-value tasks and actors (code that travels pickled: a script's functions, a
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

__all__ = ["BY_VALUE", "by_value_key", "home_registry", "oldest", "unrunnable"]

#: The bit above a registry hash (a u64) that keys its by-value queue.
BY_VALUE: Final = 1 << 64


def by_value_key(registry: int) -> int:
    """The queue key of by-value tasks (and actors) of drivers of ``registry``."""
    return registry | BY_VALUE


def home_registry(key: int) -> int:
    """The registry a queue key belongs to (itself, or a by-value key's)."""
    return key & ~BY_VALUE


def unrunnable(task_id: int, key: int, grace_ns: int) -> str:
    """Why a task queued under ``key`` fails after the no-worker grace, naming the fix."""
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
        f"registry {key:#018x} ({waited})"
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
