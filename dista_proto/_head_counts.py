"""The head's counters, kept by the moves of its records through `_lifecycle`'s tables:
no counter is updated by hand (see `_lifecycle` for what each counts)."""

from __future__ import annotations

import enum

from ._errors import LocalProtocolError
from ._head_records import ActorRecord, CallRecord, Peer, TaskRecord, TrackedObject
from ._lifecycle import (
    ACTOR_ALIVE,
    ACTOR_MOVES,
    CALL_MOVES,
    OBJ_HELD,
    OBJECT_MOVES,
    SLOT_MOVES,
    TASK_MOVES,
    TASK_PENDING,
    TASK_RUNNING,
    ActorCause,
    CallCause,
    CallState,
    ObjCause,
    Slot,
    SlotCause,
    TaskCause,
)

__all__ = ["Counts"]


def _refuse(kind: str, state: enum.IntEnum, cause: enum.IntEnum) -> LocalProtocolError:
    return LocalProtocolError(f"a {kind} in state {state.name} cannot move for cause {cause.name}")


class Counts:
    """The head's counters, kept by the moves of its records (see the module docstring)."""

    __slots__ = ("actors_alive", "held_bytes", "pending", "running")

    def __init__(self) -> None:
        self.pending = 0
        self.running = 0
        self.held_bytes = 0
        self.actors_alive = 0

    def move_task(self, task: TaskRecord, cause: TaskCause) -> None:
        old = task.state
        new = TASK_MOVES.get((old, cause))
        if new is None:
            raise _refuse("task", old, cause)
        task.state = new
        if old in TASK_PENDING:
            self.pending -= 1
        elif old in TASK_RUNNING:
            self.running -= 1
        if new in TASK_PENDING:
            self.pending += 1
        elif new in TASK_RUNNING:
            self.running += 1

    def move_slot(self, task: TaskRecord, worker: Peer, cause: SlotCause) -> None:
        """Move ``task``'s slot on ``worker``, keeping the worker's slot counts."""
        old = task.slot
        new = SLOT_MOVES.get((old, cause))
        if new is None:
            raise _refuse("task's slot", old, cause)
        task.slot = new
        if old is Slot.REAL:
            worker.free += 1
        elif old is Slot.SPARE:
            worker.spare += 1
            worker.prefetched -= task.spare_ns
            task.spare_ns = 0
        elif old is Slot.LENT:
            worker.blocked -= 1
        if new is Slot.REAL:
            worker.free -= 1
        elif new is Slot.SPARE:
            worker.spare -= 1
            worker.prefetched += task.spare_ns
        elif new is Slot.LENT:
            worker.blocked += 1

    def move_object(self, obj: TrackedObject, cause: ObjCause) -> None:
        """Move ``obj``; entering INLINE or STORED counts its ``size`` (set it first)."""
        old = obj.state
        new = OBJECT_MOVES.get((old, cause))
        if new is None:
            raise _refuse("object", old, cause)
        obj.state = new
        if old in OBJ_HELD:
            self.held_bytes -= obj.size
        if new in OBJ_HELD:
            self.held_bytes += obj.size

    def move_actor(self, actor: ActorRecord, cause: ActorCause) -> None:
        old = actor.state
        new = ACTOR_MOVES.get((old, cause))
        if new is None:
            raise _refuse("actor", old, cause)
        actor.state = new
        self.actors_alive += (new in ACTOR_ALIVE) - (old in ACTOR_ALIVE)

    def move_call(self, call: CallRecord, cause: CallCause) -> None:
        old = call.state
        new = CALL_MOVES.get((old, cause))
        if new is None:
            raise _refuse("actor call", old, cause)
        call.state = new
        self.pending += (new is CallState.UNANSWERED) - (old is CallState.UNANSWERED)
