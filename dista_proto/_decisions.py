"""What the role machines ask their binding to do: small immutable values.

A role machine (`Head`, `Worker`, `Driver`) never blocks and never calls back into user
code. After every input the binding takes its decisions and carries them out in order:
write buffers to a link, open or close a link, run a task, or hand a result to the user.
Links are small integers the machine allocates; the binding maps them to its sockets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._events import Address, HeadStats, Labels, Snapshot, Status, TimelineRecord
from ._events import Timeline as TimelineEvent
from .frame import Bytes

__all__ = [
    "ActorAwaitsHost",
    "ActorWarning",
    "Answered",
    "CallActor",
    "CancelTask",
    "CheckpointActor",
    "Close",
    "Connect",
    "Decision",
    "Exit",
    "HeadLost",
    "ObjectFailed",
    "ObjectLocated",
    "ObjectValue",
    "Refused",
    "RunTask",
    "StartActor",
    "StatsReceived",
    "StopActor",
    "TimelineReceived",
    "Welcomed",
    "Write",
]


@dataclass(frozen=True, slots=True)
class Write:
    """Write ``buffers``, in order, to ``link``."""

    link: int
    buffers: list[Bytes]


@dataclass(frozen=True, slots=True)
class Connect:
    """Open a TCP connection to ``address`` for ``link``; report `connected` or lost."""

    link: int
    address: Address


@dataclass(frozen=True, slots=True)
class Close:
    """Close ``link`` once its pending writes are flushed; ``reason`` is for logs."""

    link: int
    reason: str


@dataclass(frozen=True, slots=True)
class Exit:
    """The machine is done (a worker told to stop, a head told to stop)."""

    reason: str


@dataclass(frozen=True, slots=True)
class HeadLost:
    """The connection to the head was lost, and the machine can go on with another: connect
    again (with backoff) and call ``start``; a worker rejoins with holding, a driver resumes
    under its number. A binding that cannot (an in-memory head) ends the machine instead."""

    reason: str


@dataclass(frozen=True, slots=True)
class RunTask:
    """Run task ``task_id`` for its results ``object_id`` .. ``object_id + results - 1``.

    ``argument`` is the task frame's encoded argument, or for a task-after the encoded
    value (None without WITH_VALUE); ``inputs`` are the input objects' bytes in order and
    ``gather`` says whether they form a Seq. ``after`` is False for a plain task or task-many.
    """

    object_id: int
    task_id: int
    results: int
    argument: Bytes | None
    inputs: tuple[Bytes, ...] = ()
    gather: bool = False
    after: bool = False
    arrived: int = 0


@dataclass(frozen=True, slots=True)
class CancelTask:
    """The head wants back the task whose first result is ``object_id``.

    If it has not started, drop it and call `Worker.task_withdrawn`. If it runs: with
    ``withdraw`` let it finish; without (a cancel) interrupt it where the language allows.
    """

    object_id: int
    withdraw: bool


@dataclass(frozen=True, slots=True)
class StartActor:
    """Build actor ``actor_id`` of type ``type_id`` on this worker: from its constructor's
    encoded ``argument``, or, with ``covers`` set, from the checkpoint that covers that many
    calls. Answer with `Worker.actors` (`ActorHosting.actor_started`).

    Actor work (this, `CallActor`, `CheckpointActor`, `StopActor`) runs one piece at a
    time, in the order the decisions come: the order the head sent it.
    """

    actor_id: int
    type_id: int
    argument: Bytes | None
    covers: int | None = None
    #: This build's number in its head's order (actor-build; 0: the head gave none) and
    #: that head's epoch: the checkpoint store orders builds by them (fencing).
    build: int = 0
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class CallActor:
    """Run method ``method_id`` of actor ``actor_id`` with ``argument``; answer as a task
    (`Worker.task_done`, `Worker.task_failed`) for ``object_id``, the call's result."""

    object_id: int
    method_id: int
    actor_id: int
    argument: Bytes
    arrived: int = 0


@dataclass(frozen=True, slots=True)
class CheckpointActor:
    """Write actor ``actor_id``'s state as the checkpoint covering ``calls`` calls, then
    answer with `Worker.actors` (`ActorHosting.checkpointed`). The checkpoint covering ``keep`` calls (None: none)
    is the one the head would restore from until this one is written: keep it."""

    actor_id: int
    calls: int
    keep: int | None


@dataclass(frozen=True, slots=True)
class StopActor:
    """Destroy actor ``actor_id``; with ``forget`` (it was killed) remove its checkpoints."""

    actor_id: int
    forget: bool = True


@dataclass(frozen=True, slots=True)
class ActorAwaitsHost:
    """After a head restart, actor ``actor_id`` waits for the worker that hosted it to
    rejoin, ``wait_ms`` milliseconds at most, its calls held meanwhile; ``wait_ms`` 0: it
    waits no more, and ``message`` says where it runs now (`ERROR_AWAITS_HOST`)."""

    actor_id: int
    wait_ms: int
    message: str


@dataclass(frozen=True, slots=True)
class ActorWarning:
    """Something went wrong for actor ``actor_id`` that it lives through (a checkpoint that
    could not be written); ``message`` says what."""

    actor_id: int
    message: str


@dataclass(frozen=True, slots=True)
class Welcomed:
    """The head numbered this driver."""

    number: int
    epoch: int


@dataclass(frozen=True, slots=True)
class ObjectValue:
    """An object's encoded value reached the driver."""

    object_id: int
    value: Bytes


@dataclass(frozen=True, slots=True)
class ObjectFailed:
    """An object failed; ``message`` says why."""

    object_id: int
    message: str


@dataclass(frozen=True, slots=True)
class ObjectLocated:
    """An object lives on a worker; `Driver.fetch` brings its value."""

    object_id: int
    address: Address


@dataclass(frozen=True, slots=True)
class Refused:
    """The head refused this peer (an error frame for object 0): ``reason`` says why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Answered:
    """The head answered an observer's question (status text, the timeline; a dashboard's
    labels or snapshot)."""

    answer: Status | TimelineEvent | Labels | Snapshot


@dataclass(frozen=True, slots=True)
class StatsReceived:
    counts: HeadStats


@dataclass(frozen=True, slots=True)
class TimelineReceived:
    records: tuple[TimelineRecord, ...]


Decision = (
    Write
    | Connect
    | Close
    | Exit
    | HeadLost
    | RunTask
    | CancelTask
    | StartActor
    | CallActor
    | CheckpointActor
    | StopActor
    | ActorAwaitsHost
    | ActorWarning
    | Welcomed
    | ObjectValue
    | ObjectFailed
    | ObjectLocated
    | StatsReceived
    | TimelineReceived
    | Refused
    | Answered
)
