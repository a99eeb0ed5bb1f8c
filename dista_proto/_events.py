"""One small immutable value per frame kind, with its payload decoded into fields.

Every event carries the frame's ``object_id``; kinds that use the task ID carry ``task_id``.
A field that only one direction sends (the driver's ``checkpoint_every`` in actor-create, a
stats reply's counts) is ``None`` in the other. Events are validated when they are encoded
(`Connection.send`, `encode_event`), not when they are built: the decoder has already checked
everything it builds, and decoding is the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from . import frame as F
from .frame import Bytes

__all__ = [
    "ActorBuild", "ActorCall", "ActorCreate", "ActorKill", "ActorLookup", "ActorName",
    "ActorOpen", "ActorOrder", "ActorRestore", "Address", "Adopt", "Adopted", "Cancel",
    "Checkpoint", "Checkpointed", "Claim", "ConnectionClosed", "Covered", "Drain", "Error",
    "Event", "Fetch", "Free", "HeadStats", "Hello", "Holding", "HoldingEntry", "InlineInput",
    "Labels", "Located", "LocatedInput", "Mapped", "Part", "Release", "Result", "Resume",
    "Resumed",
    "Snapshot", "Span", "Stats", "Status", "Stop", "Stored", "Task", "TaskAfter", "TaskInput",
    "TaskInputs", "TaskMany", "TaskNames", "Timeline", "TimelineRecord", "Vitals", "Welcome",
]  # fmt: skip


class Address(NamedTuple):
    """An object server's or peer's IPv4 address: 12 bytes on the wire."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


class Resume(NamedTuple):
    """A resuming driver's old number and the epoch of the head that first numbered it."""

    number: int
    epoch: int
    #: The secret the head gave the driver (`HELLO_SECRET`); b"" for a page-only resume.
    secret: bytes = b""


class HeadStats(NamedTuple):
    """The five counts of a stats reply, in wire order (see docs/wire.md)."""

    objects: int  # objects the head counts references for
    held_bytes: int  # bytes of inline results the head keeps
    pending: int  # tasks submitted and not yet dispatched (queued or awaiting inputs)
    running: int  # tasks dispatched to a worker and not yet settled
    workers: int  # workers connected and not draining


class HoldingEntry(NamedTuple):
    """One object a rejoining worker holds, and where it can be fetched."""

    object_id: int
    address: Address


class TimelineRecord(NamedTuple):
    """One finished task: four head stamps, three worker stamps, the worker's address."""

    object_id: int
    task_id: int
    submitted: int
    queued: int
    dispatched: int
    settled: int
    arrived: int
    started: int
    ended: int
    address: Address


class InlineInput(NamedTuple):
    """A task input the head holds, sent inline (tag 0)."""

    object_id: int
    data: Bytes


class LocatedInput(NamedTuple):
    """A task input stored on a worker, sent as its location (tag 1)."""

    object_id: int
    address: Address


TaskInput = InlineInput | LocatedInput


@dataclass(frozen=True, slots=True)
class _EventBase:
    kind: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class Task(_EventBase):
    """Run the task ``task_id`` on ``argument``; its result is ``object_id``."""

    kind: ClassVar[int] = F.KIND_TASK
    object_id: int
    task_id: int
    argument: Bytes


@dataclass(frozen=True, slots=True)
class Result(_EventBase):
    """An object's encoded value. Head to a Dista driver, for an actor call: ``position``
    is where the call ran in the actor's order (the task-ID field; 0: not said)."""

    kind: ClassVar[int] = F.KIND_RESULT
    object_id: int
    value: Bytes
    position: int = 0


@dataclass(frozen=True, slots=True)
class Error(_EventBase):
    """An object failed, or (object ID 0) the connection was refused; ``message`` says why."""

    kind: ClassVar[int] = F.KIND_ERROR
    object_id: int
    message: str
    #: In the task-ID field: `ERROR_WARNING` says the object (an actor) lives on and this is
    #: a warning about it (a checkpoint that could not be written).
    mark: int = 0


@dataclass(frozen=True, slots=True)
class Hello(_EventBase):
    """The first frame to the head: who we are, our registry, where our object server is."""

    kind: ClassVar[int] = F.KIND_HELLO
    role: int
    registry_hash: int = 0
    address: Address | None = None  # workers only
    resume: Resume | None = None  # resuming drivers only
    #: In the task-ID field (0 by the page): Dista's hello marks, such as a worker's
    #: `HELLO_ANY_REGISTRY` (it runs by-value code from drivers of any registry), or a
    #: driver's or client's `HELLO_SECRET` (it asks for a secret).
    mark: int = 0


@dataclass(frozen=True, slots=True)
class Welcome(_EventBase):
    """The head's answer to a driver's hello: its number and the head's epoch, and the
    driver's secret if its hello asked for one (`HELLO_SECRET`)."""

    kind: ClassVar[int] = F.KIND_WELCOME
    number: int
    epoch: int
    secret: bytes = b""


@dataclass(frozen=True, slots=True)
class TaskAfter(_EventBase):
    """A task whose argument is built from other results (see docs/wire.md)."""

    kind: ClassVar[int] = F.KIND_TASK_AFTER
    object_id: int
    task_id: int
    inputs: tuple[int, ...]
    gather: bool = False
    value: Bytes | None = None  # WITH_VALUE
    results: int | None = None  # MANY: the number of results


@dataclass(frozen=True, slots=True)
class Stored(_EventBase):
    """The result stayed on the worker; it is ``size`` bytes."""

    kind: ClassVar[int] = F.KIND_STORED
    object_id: int
    size: int


@dataclass(frozen=True, slots=True)
class Located(_EventBase):
    """The result lives on the worker whose object server is at ``address``. Head to
    worker, a fetch grant: to the fetcher at ``address``'s host, or to the one showing
    ``token`` (docs/protocol.md, "Extensions: fetch grants")."""

    kind: ClassVar[int] = F.KIND_LOCATED
    object_id: int
    address: Address
    token: bytes = b""
    #: Head to a Dista driver, for an actor call: where it ran in the actor's order.
    position: int = 0


@dataclass(frozen=True, slots=True)
class Fetch(_EventBase):
    """Send this object back; ``part`` is the largest part taken, 0 for one whole frame."""

    kind: ClassVar[int] = F.KIND_FETCH
    object_id: int
    part: int = F.PART_SIZE
    token: bytes = b""  # a driver's fetch token, when it has one
    #: Dista's extension (the task-ID field): the fetcher's mailbox on this host, where an
    #: object server may send the object as a memory file (`Mapped`); 0 for none.
    mailbox: int = 0


@dataclass(frozen=True, slots=True)
class TaskInputs(_EventBase):
    """A task-after as the head sends it to a worker, with each input's bytes or location."""

    kind: ClassVar[int] = F.KIND_TASK_INPUTS
    object_id: int
    task_id: int
    inputs: tuple[TaskInput, ...]
    gather: bool = False
    value: Bytes | None = None
    results: int | None = None


@dataclass(frozen=True, slots=True)
class Release(_EventBase):
    """The driver is done with this object."""

    kind: ClassVar[int] = F.KIND_RELEASE
    object_id: int


@dataclass(frozen=True, slots=True)
class Free(_EventBase):
    """Delete this object. ``mark`` (in the task-ID field) is Dista's extension: see
    `dista_proto.FREE_WITHDRAW` and docs/wire.md, "Extensions"."""

    kind: ClassVar[int] = F.KIND_FREE
    object_id: int
    mark: int = 0


@dataclass(frozen=True, slots=True)
class Stats(_EventBase):
    """A stats request (``counts`` None, from a driver) or the head's reply. A request's
    ``mark`` (the task-ID field) is Dista's `STATS_NO_REPLY` for a keepalive."""

    kind: ClassVar[int] = F.KIND_STATS
    counts: HeadStats | None = None
    mark: int = 0


@dataclass(frozen=True, slots=True)
class Holding(_EventBase):
    """A rejoining worker's objects."""

    kind: ClassVar[int] = F.KIND_HOLDING
    entries: tuple[HoldingEntry, ...]


@dataclass(frozen=True, slots=True)
class Claim(_EventBase):
    """A resuming driver still holds this object, which lives on a worker."""

    kind: ClassVar[int] = F.KIND_CLAIM
    object_id: int


@dataclass(frozen=True, slots=True)
class Resumed(_EventBase):
    """A resuming driver has restored, claimed or resubmitted everything."""

    kind: ClassVar[int] = F.KIND_RESUMED


@dataclass(frozen=True, slots=True)
class Span(_EventBase):
    """Wall-clock nanoseconds: when the task arrived at the worker, started and ended."""

    kind: ClassVar[int] = F.KIND_SPAN
    object_id: int
    arrived: int
    started: int
    ended: int
    #: In the task-ID field: 0 for the page's span before the result, else one of Dista's
    #: extension marks (`SPAN_BLOCKED`, `SPAN_RESUMED`, `SPAN_WITHDRAWN`).
    mark: int = 0


@dataclass(frozen=True, slots=True)
class Timeline(_EventBase):
    """A timeline request (``records`` None) or the head's reply."""

    kind: ClassVar[int] = F.KIND_TIMELINE
    records: tuple[TimelineRecord, ...] | None = None
    #: The head's reply already encoded (count, then the records), sent as it lies instead
    #: of ``records``: how the head answers an observer (`dista_proto._timeline`).
    packed: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ActorCreate(_EventBase):
    """Create actor ``object_id`` of type ``task_id``; ``checkpoint_every`` from drivers only."""

    kind: ClassVar[int] = F.KIND_ACTOR_CREATE
    object_id: int
    task_id: int
    argument: Bytes
    checkpoint_every: int | None = None


@dataclass(frozen=True, slots=True)
class ActorCall(_EventBase):
    """Call method ``task_id`` of actor ``actor_id``; the call's result is ``object_id``."""

    kind: ClassVar[int] = F.KIND_ACTOR_CALL
    object_id: int
    task_id: int
    actor_id: int
    argument: Bytes


@dataclass(frozen=True, slots=True)
class ActorKill(_EventBase):
    """Destroy the actor ``object_id``."""

    kind: ClassVar[int] = F.KIND_ACTOR_KILL
    object_id: int
    #: In the task-ID field: `KILL_AFTER_CALLS` lets the calls already made run first.
    mark: int = 0


@dataclass(frozen=True, slots=True)
class ActorOpen(_EventBase):
    """Dista's extension: open actor ``object_id`` with the ``capability`` its creator drew
    (the creator sends it right after its actor-create, to record it)."""

    kind: ClassVar[int] = F.KIND_ACTOR_OPEN
    object_id: int
    capability: bytes


@dataclass(frozen=True, slots=True)
class ActorName(_EventBase):
    """Dista's extension: actor ``object_id`` (this driver's, about to be created) is
    ``name``; the head answers ``request`` (0: no answer wanted, a resume's)."""

    kind: ClassVar[int] = F.KIND_ACTOR_NAME
    object_id: int
    request: int
    name: str


@dataclass(frozen=True, slots=True)
class ActorLookup(_EventBase):
    """Dista's extension: which actor is ``name``? Answered on ``object_id`` (a request ID
    of the driver's; 0: none wanted, a resume saying it still holds the actor)."""

    kind: ClassVar[int] = F.KIND_ACTOR_LOOKUP
    object_id: int
    name: str


@dataclass(frozen=True, slots=True)
class ActorOrder(_EventBase):
    """Dista's extension, a resuming driver to the head: where its kept calls to actor
    ``object_id`` ran in the actor's order, as (call ID, position) pairs (the positions the
    head gave with their answers), so that a new head replays them in that order."""

    kind: ClassVar[int] = F.KIND_ACTOR_ORDER
    object_id: int
    positions: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ActorBuild(_EventBase):
    """Dista's extension, head to a worker with a store: the actor-create or actor-restore
    of actor ``object_id`` that follows is build ``build`` (from 1) of head ``epoch``."""

    kind: ClassVar[int] = F.KIND_ACTOR_BUILD
    object_id: int
    build: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Checkpoint(_EventBase):
    """From a driver: checkpoint ``actor_id``, the checkpoint's ID being ``object_id``.

    From the head: checkpoint actor ``object_id``; the new checkpoint covers ``task_id``
    calls, and ``restore_covers`` is what the checkpoint it would restore from covers
    (None for none: -1 on the wire).
    """

    kind: ClassVar[int] = F.KIND_CHECKPOINT
    object_id: int
    task_id: int = 0
    actor_id: int | None = None  # from a driver
    restore_covers: int | None = None  # from the head


@dataclass(frozen=True, slots=True)
class Checkpointed(_EventBase):
    """The checkpoint frame's IDs, and ``failure`` None if written, else why not."""

    kind: ClassVar[int] = F.KIND_CHECKPOINTED
    object_id: int
    task_id: int
    failure: str | None = None


@dataclass(frozen=True, slots=True)
class ActorRestore(_EventBase):
    """Build actor ``object_id`` of type ``task_id`` from the checkpoint covering ``covers``."""

    kind: ClassVar[int] = F.KIND_ACTOR_RESTORE
    object_id: int
    task_id: int
    covers: int


@dataclass(frozen=True, slots=True)
class Covered(_EventBase):
    """A checkpoint of actor ``object_id`` now includes this driver's calls up to ``newest``."""

    kind: ClassVar[int] = F.KIND_COVERED
    object_id: int
    newest: int


@dataclass(frozen=True, slots=True)
class Status(_EventBase):
    """A status request (``text`` None, from an observer) or the head's state as text."""

    kind: ClassVar[int] = F.KIND_STATUS
    text: str | None = None


@dataclass(frozen=True, slots=True)
class Stop(_EventBase):
    """Shut down; a worker exits instead of rejoining."""

    kind: ClassVar[int] = F.KIND_STOP


@dataclass(frozen=True, slots=True)
class TaskMany(_EventBase):
    """Run ``task_id``; its ``results`` results are ``object_id`` and the IDs after it."""

    kind: ClassVar[int] = F.KIND_TASK_MANY
    object_id: int
    task_id: int
    results: int
    argument: Bytes


@dataclass(frozen=True, slots=True)
class Drain(_EventBase):
    """The worker was told to stop: send it no more work, move what it holds."""

    kind: ClassVar[int] = F.KIND_DRAIN


@dataclass(frozen=True, slots=True)
class Adopt(_EventBase):
    """Fetch ``object_id`` from a draining worker at ``address`` and keep it."""

    kind: ClassVar[int] = F.KIND_ADOPT
    object_id: int
    address: Address


@dataclass(frozen=True, slots=True)
class Adopted(_EventBase):
    """The object's new location, or (``address`` None) ``failure`` says why not."""

    kind: ClassVar[int] = F.KIND_ADOPTED
    object_id: int
    address: Address | None
    failure: str = ""


@dataclass(frozen=True, slots=True)
class Cancel(_EventBase):
    """Fail this object's task with "cancelled"; drop it if it hasn't run."""

    kind: ClassVar[int] = F.KIND_CANCEL
    object_id: int
    #: In the task-ID field: `CANCEL_FORCE` also ends the worker process running the task.
    mark: int = 0


@dataclass(frozen=True, slots=True)
class Part(_EventBase):
    """One part of an object of ``size`` bytes, at ``offset``."""

    kind: ClassVar[int] = F.KIND_PART
    object_id: int
    size: int
    offset: int
    data: Bytes


@dataclass(frozen=True, slots=True)
class Mapped(_EventBase):
    """Dista's extension, object server to a fetcher that named a mailbox: object
    ``object_id`` (``size`` bytes) went there as a sealed memory file, with ``ticket``."""

    kind: ClassVar[int] = F.KIND_MAPPED
    object_id: int
    size: int
    ticket: bytes


@dataclass(frozen=True, slots=True)
class TaskNames(_EventBase):
    """Dista's extension, a driver or worker to head right after its hello: the hashes of
    the task names it imports (`name_hash` of ``module:qualname``), strictly increasing."""

    kind: ClassVar[int] = F.KIND_TASK_NAMES
    names: tuple[int, ...]
    object_id: int = 0


@dataclass(frozen=True, slots=True)
class Labels(_EventBase):
    """Dista's extension: what people call some IDs (a task's function, an actor's class,
    ``Class.method`` of its calls), from a driver; an observer's request for the head's
    labels from the ``start``-th on (no entries); the head's answer (its entries from
    ``start`` on)."""

    kind: ClassVar[int] = F.KIND_LABELS
    entries: tuple[tuple[int, str], ...] = ()
    start: int = 0


@dataclass(frozen=True, slots=True)
class Vitals(_EventBase):
    """Dista's extension, a driver or worker to head now and then: its process ID, resident
    bytes, and the checkpoints it wrote since it started (count, bytes, nanoseconds)."""

    kind: ClassVar[int] = F.KIND_VITALS
    pid: int
    rss: int
    checkpoints: int = 0
    checkpoint_bytes: int = 0
    checkpoint_ns: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot(_EventBase):
    """Dista's extension: an observer's request for the head's state and the timeline
    records after the ``since``-th (``document`` None), or the head's answer: the state as
    JSON and the records packed (`dista_proto._snapshot_rows`)."""

    kind: ClassVar[int] = F.KIND_SNAPSHOT
    since: int = 0
    document: str | None = None
    rows: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed the stream cleanly, between frames (not a frame kind)."""


Event = (
    Task | Result | Error | Hello | Welcome | TaskAfter | Stored | Located | Fetch | TaskInputs
    | Release | Free | Stats | Holding | Claim | Resumed | Span | Timeline | ActorCreate
    | ActorCall | ActorKill | Checkpoint | Checkpointed | ActorRestore | Covered | Status
    | Stop | TaskMany | Drain | Adopt | Adopted | Cancel | Part | ActorOpen | ActorBuild
    | ActorOrder | ActorName | ActorLookup | Mapped | TaskNames | Labels | Vitals | Snapshot
)  # fmt: skip
