"""The lifecycles of the head's records, as tables: tasks, the slots they hold, objects,
actors and actor calls.

Theory of operation
-------------------
Every record the head keeps has a state, and every change of state is a pair
``(state, cause) -> state`` in one table below; nothing else assigns a state. `Counts.move_*`
(`_head_counts`) looks the pair up, refuses one the table does not have with a
`LocalProtocolError` naming both (the head's own bug: a peer's frames never reach a move
they may not make, the parts check first), sets the new state, and keeps the head's
counters as the states imply, so no counter is updated by hand:

- ``pending``: tasks WAITING or QUEUED, and actor calls not answered;
- ``running``: tasks on a worker (RUNNING, WITHDRAWING, DROPPED);
- ``held_bytes``: the sizes of objects whose value the head or a worker holds (INLINE,
  STORED);
- ``actors_alive``: actors created and not DEAD;
- the tallies a dashboard shows per function and per driver (`Tally`, `TASK_TALLIES`):
  tasks submitted, finished (answered by their worker, a raised exception included),
  failed (a task's first result failed while it was the task's: any cause) and retried
  (run again after their worker was lost), and actor calls taken.

A task's slot (which of its worker's slots it holds) is a lifecycle of its own, moved with
the worker's slot counts (`Counts.move_slot`): a real slot, a prefetch slot for a task
known to be short, or none while it blocks reading other objects (its slot lent).

The tables are the source of docs/protocol.md's state diagrams (`diagram`), and a test
walks every pair of every table.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final

__all__ = [
    "ACTOR_MOVES",
    "TASK_TALLIES",
    "Tally",
    "CALL_MOVES",
    "OBJECT_MOVES",
    "SLOT_MOVES",
    "TABLES",
    "TASK_MOVES",
    "ActorCause",
    "ActorState",
    "CallCause",
    "CallState",
    "ObjCause",
    "ObjState",
    "Slot",
    "SlotCause",
    "TaskCause",
    "TaskState",
    "diagram",
    "diagrams",
]

# States and causes are IntEnums: a table lookup hashes them as ints, in C (an Enum's hash
# is a Python method), which keeps a move cheap on the head's per-task path.


class TaskState(enum.IntEnum):
    NEW = 0  # made, not yet placed (counted nowhere)
    WAITING = 1  # for inputs
    QUEUED = 2  # ready, waiting for a worker slot
    RUNNING = 3  # dispatched to ``worker``
    WITHDRAWING = 4  # running, asked back (to run where a worker idles)
    DROPPED = 5  # running, cancelled or orphaned: its answers are dropped
    DONE = 6  # settled: answered, failed or dropped


class TaskCause(enum.IntEnum):
    WAIT = 0  # an input is not there (yet, or again)
    READY = 1  # every input is there
    DISPATCH = 2  # sent to a worker
    ASK_BACK = 3  # a worker ran dry: asked back from its worker
    WITHDRAWN = 4  # its worker gave it back unstarted
    LOST = 5  # its worker was lost: to be run again (or failed, if it ran out of retries)
    ANSWERED = 6  # its worker answered every result
    DROP = 7  # it fails while it runs: its answers will be dropped
    FAIL = 8  # it fails before it runs (an input failed, cancel, no worker, gave up)
    AHEAD = 9  # sent to the worker making the inputs it waits for (`_head_ahead`)


_T = TaskState
_TC = TaskCause
#: ``(state, cause) -> state`` for tasks.
TASK_MOVES: Final[dict[tuple[TaskState, TaskCause], TaskState]] = {
    (_T.NEW, _TC.READY): _T.QUEUED,
    (_T.NEW, _TC.WAIT): _T.WAITING,
    (_T.NEW, _TC.FAIL): _T.DONE,
    (_T.WAITING, _TC.READY): _T.QUEUED,
    (_T.WAITING, _TC.FAIL): _T.DONE,
    (_T.WAITING, _TC.AHEAD): _T.RUNNING,
    (_T.QUEUED, _TC.DISPATCH): _T.RUNNING,
    (_T.QUEUED, _TC.WAIT): _T.WAITING,  # an input went pending again (its worker lost)
    (_T.QUEUED, _TC.FAIL): _T.DONE,
    (_T.RUNNING, _TC.ASK_BACK): _T.WITHDRAWING,
    (_T.RUNNING, _TC.WITHDRAWN): _T.QUEUED,
    (_T.RUNNING, _TC.LOST): _T.QUEUED,
    (_T.RUNNING, _TC.ANSWERED): _T.DONE,
    (_T.RUNNING, _TC.DROP): _T.DROPPED,
    (_T.WITHDRAWING, _TC.WITHDRAWN): _T.QUEUED,
    (_T.WITHDRAWING, _TC.LOST): _T.QUEUED,
    (_T.WITHDRAWING, _TC.ANSWERED): _T.DONE,
    (_T.WITHDRAWING, _TC.DROP): _T.DROPPED,
    (_T.DROPPED, _TC.WITHDRAWN): _T.DONE,
    (_T.DROPPED, _TC.LOST): _T.DONE,
    (_T.DROPPED, _TC.ANSWERED): _T.DONE,
}
TASK_PENDING: Final = frozenset({_T.WAITING, _T.QUEUED})


class Tally(enum.IntEnum):
    """What a dashboard counts of tasks, per function and per driver (`Counts.tallies`)."""

    SUBMITTED = 0
    FINISHED = 1
    FAILED = 2
    RETRIED = 3


#: The task moves that count one: a task's first move is its submission.
TASK_TALLIES: Final[dict[tuple[TaskState, TaskCause], Tally]] = {
    **{(_T.NEW, cause): Tally.SUBMITTED for cause in (_TC.READY, _TC.WAIT, _TC.FAIL)},
    (_T.RUNNING, _TC.ANSWERED): Tally.FINISHED,
    (_T.WITHDRAWING, _TC.ANSWERED): Tally.FINISHED,
    (_T.RUNNING, _TC.LOST): Tally.RETRIED,
    (_T.WITHDRAWING, _TC.LOST): Tally.RETRIED,
}
TASK_RUNNING: Final = frozenset({_T.RUNNING, _T.WITHDRAWING, _T.DROPPED})


class Slot(enum.IntEnum):
    NONE = 0  # holds no slot of a worker
    REAL = 1  # one of its worker's ``worker_slots``
    SPARE = 2  # one of its worker's prefetch slots (a task known to be short)
    LENT = 3  # it blocks reading other objects: its slot is lent meanwhile


class SlotCause(enum.IntEnum):
    TAKE = 0  # dispatched to a real slot
    TAKE_SPARE = 1  # dispatched to a prefetch slot
    BLOCK = 2  # it reads other objects: lend its slot
    RESUME = 3  # it goes on: it takes a real slot back (even if that overcommits a while)
    GIVE_BACK = 4  # it ended, came back, or its worker was lost


_S = Slot
_SC = SlotCause
#: ``(slot, cause) -> slot`` for a task's slot on its worker.
SLOT_MOVES: Final[dict[tuple[Slot, SlotCause], Slot]] = {
    (_S.NONE, _SC.TAKE): _S.REAL,
    (_S.NONE, _SC.TAKE_SPARE): _S.SPARE,
    (_S.REAL, _SC.BLOCK): _S.LENT,
    (_S.SPARE, _SC.BLOCK): _S.LENT,
    (_S.LENT, _SC.RESUME): _S.REAL,
    (_S.REAL, _SC.GIVE_BACK): _S.NONE,
    (_S.SPARE, _SC.GIVE_BACK): _S.NONE,
    (_S.LENT, _SC.GIVE_BACK): _S.NONE,
}


class ObjState(enum.IntEnum):
    PENDING = 0  # its task has not answered (or its holder may come back)
    INLINE = 1  # the head holds the value
    STORED = 2  # a worker holds the value
    FAILED = 3  # ``error`` says why
    FORGOTTEN = 4  # nobody references it: gone from the head


class ObjCause(enum.IntEnum):
    INLINE = 0  # a small value came (a worker's result, or a resuming driver's)
    STORE = 1  # a worker stored it
    FAIL = 2
    HOLDER_LOST = 3  # its worker was lost: it waits for it to come back, or fails
    ATTACH = 4  # a worker holding it (came back, or reported it) is its holder
    FORGET = 5


_O = ObjState
_OC = ObjCause
#: ``(state, cause) -> state`` for objects.
OBJECT_MOVES: Final[dict[tuple[ObjState, ObjCause], ObjState]] = {
    (_O.PENDING, _OC.INLINE): _O.INLINE,
    (_O.PENDING, _OC.STORE): _O.STORED,
    (_O.PENDING, _OC.ATTACH): _O.STORED,
    (_O.PENDING, _OC.FAIL): _O.FAILED,
    (_O.STORED, _OC.HOLDER_LOST): _O.PENDING,
    (_O.PENDING, _OC.FORGET): _O.FORGOTTEN,
    (_O.INLINE, _OC.FORGET): _O.FORGOTTEN,
    (_O.STORED, _OC.FORGET): _O.FORGOTTEN,
    (_O.FAILED, _OC.FORGET): _O.FORGOTTEN,
}
OBJ_HELD: Final = frozenset({_O.INLINE, _O.STORED})


class ActorState(enum.IntEnum):
    NEW = 0  # made, not yet placed
    WAITING = 1  # for a worker: none is free, or its worker finishes its tasks
    STARTING = 2  # actor-create or actor-restore sent, no answer yet
    READY = 3
    DEAD = 4  # killed, failed, or lost for good: ``why`` says which


class ActorCause(enum.IntEnum):
    PLACE = 0  # to be placed on a worker (made, or its worker lost or draining)
    START = 1  # actor-create or actor-restore sent to its worker
    STARTED = 2  # its worker answered it
    END = 3


_A = ActorState
_AC = ActorCause
#: ``(state, cause) -> state`` for actors.
ACTOR_MOVES: Final[dict[tuple[ActorState, ActorCause], ActorState]] = {
    (_A.NEW, _AC.PLACE): _A.WAITING,
    (_A.NEW, _AC.END): _A.DEAD,
    (_A.WAITING, _AC.PLACE): _A.WAITING,
    (_A.WAITING, _AC.START): _A.STARTING,
    (_A.WAITING, _AC.END): _A.DEAD,
    (_A.STARTING, _AC.PLACE): _A.WAITING,
    (_A.STARTING, _AC.STARTED): _A.READY,
    (_A.STARTING, _AC.END): _A.DEAD,
    (_A.READY, _AC.PLACE): _A.WAITING,
    (_A.READY, _AC.STARTED): _A.READY,  # a second answer to its create (a forged one)
    (_A.READY, _AC.END): _A.DEAD,
}
ACTOR_ALIVE: Final = frozenset({_A.WAITING, _A.STARTING, _A.READY})


class CallState(enum.IntEnum):
    NEW = 0
    UNANSWERED = 1  # its caller waits for its answer
    ANSWERED = 2  # answered (or run again for the actor's state only): kept until covered
    FAILED = 3  # its actor ended before it was answered


class CallCause(enum.IntEnum):
    TAKE = 0  # a call to answer
    REPLAY = 1  # a call answered before (a resuming driver's): it runs for the state only
    ANSWER = 2  # its worker answered it, or said a checkpoint covers it
    FAIL = 3


_C = CallState
_CC = CallCause
#: ``(state, cause) -> state`` for actor calls.
CALL_MOVES: Final[dict[tuple[CallState, CallCause], CallState]] = {
    (_C.NEW, _CC.TAKE): _C.UNANSWERED,
    (_C.NEW, _CC.REPLAY): _C.ANSWERED,
    (_C.UNANSWERED, _CC.ANSWER): _C.ANSWERED,
    (_C.UNANSWERED, _CC.FAIL): _C.FAILED,
}


def diagram(moves: Iterable[tuple[tuple[enum.IntEnum, enum.IntEnum], enum.IntEnum]]) -> str:
    """A table's ``items()`` as a Mermaid state diagram (docs/protocol.md draws them from
    here: `diagrams`)."""
    lines = ["stateDiagram-v2"]
    for (state, cause), new in moves:
        lines.append(f"    {state.name} --> {new.name}: {cause.name.lower()}")
    return "\n".join(lines)


#: The tables, by the name docs/protocol.md gives each diagram.
TABLES: Final[dict[str, Iterable[tuple[tuple[enum.IntEnum, enum.IntEnum], enum.IntEnum]]]] = {
    "task": TASK_MOVES.items(),
    "slot": SLOT_MOVES.items(),
    "object": OBJECT_MOVES.items(),
    "actor": ACTOR_MOVES.items(),
    "actor call": CALL_MOVES.items(),
}


def diagrams() -> str:
    """Every table's diagram, headed by its name, as docs/protocol.md shows them."""
    return "\n".join(f"{name}:\n\n```mermaid\n{diagram(m)}\n```\n" for name, m in TABLES.items())
