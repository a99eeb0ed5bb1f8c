"""The head's counters, kept by the moves of its records through `_lifecycle`'s tables:
no counter is updated by hand (see `_lifecycle` for what each counts)."""

from __future__ import annotations

import enum
from typing import Final

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
    TASK_TALLIES,
    ActorCause,
    CallCause,
    CallState,
    ObjCause,
    Slot,
    SlotCause,
    Tally,
    TaskCause,
)

__all__ = ["Counts"]


# Each move is one lookup: the tables compiled, once, with what a move changes in the counts
# (a move is on the head's per-task path several times).
_TASK: Final = {
    pair: (
        new,
        (new in TASK_PENDING) - (pair[0] in TASK_PENDING),
        (new in TASK_RUNNING) - (pair[0] in TASK_RUNNING),
        TASK_TALLIES.get(pair, -1),
    )
    for pair, new in TASK_MOVES.items()
}
#: The most (function, driver) rows tallied apart; past it a new function's tasks share the
#: row of function 0 (a driver making a by-value function per call would otherwise grow the
#: head without bound).
MAX_TALLY_ROWS: Final = 10_000
_U64: Final = (1 << 64) - 1
_FAIL: Final = ObjCause.FAIL
_FAILED: Final = int(Tally.FAILED)
_HELD: Final = {
    pair: (new, (new in OBJ_HELD) - (pair[0] in OBJ_HELD)) for pair, new in OBJECT_MOVES.items()
}


def _slot_counts(slot: Slot) -> tuple[int, int, int, int]:
    """(free, spare, blocked, prefetched) a task in ``slot`` takes from its worker."""
    return (
        int(slot is Slot.REAL),
        int(slot is Slot.SPARE),
        -int(slot is Slot.LENT),
        -int(slot is Slot.SPARE),
    )


def _slot_move(old: Slot, new: Slot) -> tuple[Slot, int, int, int, int]:
    free, spare, blocked, prefetched = (
        a - b for a, b in zip(_slot_counts(old), _slot_counts(new), strict=True)
    )
    return new, free, spare, blocked, prefetched


_SLOT: Final = {pair: _slot_move(pair[0], new) for pair, new in SLOT_MOVES.items()}


def _refuse(kind: str, state: enum.IntEnum, cause: enum.IntEnum) -> LocalProtocolError:
    return LocalProtocolError(f"a {kind} in state {state.name} cannot move for cause {cause.name}")


class Counts:
    """The head's counters, kept by the moves of its records (see the module docstring)."""

    __slots__ = ("actor_calls", "actors_alive", "held_bytes", "pending", "rows", "running")

    def __init__(self) -> None:
        self.pending: int = 0
        self.running: int = 0
        self.held_bytes: int = 0
        self.actors_alive: int = 0
        self.actor_calls: int = 0
        #: Per function ID and owner link (the key ``owner << 64 | function``): a
        #: `Tally`-indexed list of counts since the head started. A task holds its row
        #: from its intake on (`row`, `TaskRecord.tally`): its tallies look nothing up
        #: (they are on every task's path). Summed per function or per driver when a
        #: snapshot asks (`by_function`, `by_owner`).
        self.rows: dict[int, list[int]] = {}

    def move_task(self, task: TaskRecord, cause: TaskCause) -> None:
        move = _TASK.get((task.state, cause))
        if move is None:
            raise _refuse("task", task.state, cause)
        task.state, pending, running, tally = move
        self.pending += pending
        self.running += running
        if tally >= 0:
            task.tally[tally] += 1

    def row(self, function: int, owner: int) -> list[int]:
        """The tallies of ``function``'s tasks from the driver on link ``owner``."""
        key = owner << 64 | function
        row = self.rows.get(key)
        if row is None:
            if len(self.rows) >= MAX_TALLY_ROWS:
                key = owner << 64
            row = self.rows.setdefault(key, [0, 0, 0, 0])
        return row

    def by_function(self) -> dict[int, list[int]]:
        return _summed(self.rows, _U64)

    def by_owner(self) -> dict[int, list[int]]:
        return _summed(self.rows, None)

    def rename_owner(self, was: int, now: int) -> None:
        """The driver on link ``was`` is on ``now``: its rows go with it."""
        for key in [k for k in self.rows if k >> 64 == was]:
            self.rows[now << 64 | key & _U64] = self.rows.pop(key)

    def owner_gone(self, link: int) -> None:
        """A driver left for good: its rows are kept under owner 0 (the functions' totals
        never go down), so that the rows stay as many as the functions and drivers there
        are."""
        for key in [k for k in self.rows if k >> 64 == link]:
            row = self.rows.pop(key)
            into = self.rows.setdefault(key & _U64, [0, 0, 0, 0])
            for i, n in enumerate(row):
                into[i] += n

    def move_slot(self, task: TaskRecord, worker: Peer, cause: SlotCause) -> None:
        """Move ``task``'s slot on ``worker``, keeping the worker's slot counts (a prefetch
        slot counts the task's estimate, ``spare_ns``, in ``prefetched``: set it first)."""
        move = _SLOT.get((task.slot, cause))
        if move is None:
            raise _refuse("task's slot", task.slot, cause)
        task.slot, free, spare, blocked, prefetched = move
        worker.free += free
        worker.spare += spare
        worker.blocked += blocked
        if prefetched:
            worker.prefetched += prefetched * task.spare_ns
            if prefetched < 0:
                task.spare_ns = 0

    def move_object(self, obj: TrackedObject, cause: ObjCause) -> None:
        """Move ``obj``; entering INLINE or STORED counts its ``size`` (set it first)."""
        move = _HELD.get((obj.state, cause))
        if move is None:
            raise _refuse("object", obj.state, cause)
        obj.state, held = move
        if cause is _FAIL:
            task = obj.task
            if task is not None and task.oid == obj.oid:
                task.tally[_FAILED] += 1
        if held:
            self.held_bytes += held * obj.size

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
        self.actor_calls += cause is CallCause.TAKE


def _summed(rows: dict[int, list[int]], mask: int | None) -> dict[int, list[int]]:
    """``rows`` summed by function (``mask``: the key's low 64 bits) or by owner (None)."""
    out: dict[int, list[int]] = {}
    for key, row in rows.items():
        into = out.setdefault(key & mask if mask is not None else key >> 64, [0, 0, 0, 0])
        for i, n in enumerate(row):
            into[i] += n
    return out
