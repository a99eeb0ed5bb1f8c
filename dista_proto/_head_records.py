"""The head's records: peers, objects, tasks, actors and their calls, as small mutable
slotted classes. Their states move only through `_lifecycle`'s tables.

They are plain classes rather than dataclasses because a queued task costs one of each and
a million queued tasks must stay well under a GiB (see benchmarks/head_core.py).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from ._conventions import TASK_ID_MASK
from ._durations import PREFETCH_NS
from ._events import ActorCreate, Address, Task, TaskMany
from ._lifecycle import ActorState, CallState, ObjState, Slot, TaskState
from ._roles import Role
from .frame import Bytes

__all__ = [
    "ActorRecord",
    "ActorState",
    "CallRecord",
    "ObjState",
    "Peer",
    "TaskRecord",
    "TaskState",
    "TrackedObject",
]

NO_ADDRESS: Final = Address("0.0.0.0", 0)
#: The tallies of a task no intake counts (tests build records directly): never read.
_UNTALLIED: Final = [0, 0, 0, 0]


class Peer:
    """One connection to the head: a driver, client, worker or observer."""

    __slots__ = (
        "actor",
        "address",
        "any_registry",
        "blocked",
        "checkpoints",
        "draining",
        "epoch",
        "free",
        "heard",
        "holds",
        "host",
        "identity",
        "idle",
        "link",
        "names_sent",
        "number",
        "pid",
        "prefetched",
        "registry",
        "resuming",
        "role",
        "roles",
        "rss",
        "running",
        "runs_ahead",
        "secret",
        "spare",
        "subject",
        "token",
        "unconfirmed",
        "why",
    )

    def __init__(self, link: int) -> None:
        self.link: int = link
        self.role: Role | None = None  # until hello
        self.registry: int = 0
        self.number: int = 0  # drivers and clients
        self.address: Address = NO_ADDRESS  # workers
        #: A worker that runs by-value code of any registry (`HELLO_ANY_REGISTRY`).
        self.any_registry: bool = False
        #: A worker with a checkpoint store (`HELLO_CHECKPOINTS`): it may restore actors.
        self.checkpoints: bool = False
        #: A worker that runs tasks ahead (`HELLO_RUNS_AHEAD`, `dista_proto._head_ahead`).
        self.runs_ahead: bool = False
        #: It said which tasks it imports (task-names, `Registries`).
        self.names_sent: bool = False
        self.host: str = ""  # the IPv4 address it connects from, for fetch grants (`Head.peer`)
        self.pid: int = 0  # its process ID and resident bytes, from its vitals (0: not said)
        self.rss: int = 0
        self.free: int = 0  # worker slots not running a task
        self.spare: int = 0  # prefetch slots, for tasks known to be short, not running one
        self.prefetched: int = 0  # estimated ns of the tasks in its prefetch slots
        self.idle: bool = False  # in its registry's idle deque
        self.draining: bool = False
        self.blocked: int = 0  # of its running tasks, those blocked reading others (slot lent)
        self.running: dict[int, TaskRecord] = {}  # first result ID -> task, workers
        self.holds: set[int] = set()  # stored objects, workers
        #: The actor this worker hosts, or is kept free for (it runs no tasks meanwhile).
        self.actor: ActorRecord | None = None
        self.heard: int = 0  # when the head last read from it (workers: liveness)
        #: A driver that said hello with a resume pair and has not sent resumed yet.
        self.resuming: bool = False
        #: A driver's: the epoch of the head that first numbered it.
        self.epoch: int = 0
        #: A driver resuming on a new connection to this same head: the objects it held
        #: and the actors it owned on the old one that its resume has not named yet (at
        #: resumed, those it released or killed meanwhile go).
        self.unconfirmed: set[int] | None = None
        self.why: str = ""  # what a draining worker waits for (status)
        #: The role words of the peer's certificate (`Head.authenticated`); None: plain TCP,
        #: unrestricted.
        self.roles: frozenset[str] | None = None
        #: The SHA-256 of its certificate, and its subject for logs (b"", "": plain TCP).
        self.identity: bytes = b""
        self.subject: str = ""
        #: A driver's secret (`dista_proto._credentials`) and the fetch token drawn from
        #: it; b"" for a driver that did not ask for one (it fetches by host grants).
        self.secret: bytes = b""
        self.token: bytes = b""

    @property
    def name(self) -> str:
        """How logs, errors and status call it: by address and process ID where known."""
        pid = f"pid {self.pid}" if self.pid else ""
        if self.role in (Role.DRIVER, Role.CLIENT):
            where = ", ".join(x for x in (self.host, pid) if x)
            return f"driver {self.number}" + (f" ({where})" if where else "")
        if self.role == Role.WORKER:
            return f"worker {self.address}" + (f" ({pid})" if pid else "")
        return f"peer {self.link}"

    def fits_prefetch(self, cost: int | None) -> bool:
        """Whether a task of estimated ``cost`` (None: not short) fits a prefetch slot."""
        return cost is not None and self.spare > 0 and self.prefetched + cost <= PREFETCH_NS

    def fits(self, cost: int | None) -> bool:
        """Whether this worker has room for a task of estimated ``cost``: a slot or a
        prefetch one."""
        return self.free > 0 or self.fits_prefetch(cost)


class TrackedObject:
    """An object the head counts references for."""

    __slots__ = (
        "error",
        "held",
        "holder",
        "maker",
        "oid",
        "owner",
        "refs",
        "size",
        "state",
        "task",
        "value",
        "waiters",
    )

    def __init__(self, oid: int, owner: int, task: TaskRecord | None) -> None:
        self.oid: int = oid
        self.owner: int = owner  # the owning driver's link
        self.held: bool = True  # the driver's reference, until release
        self.refs: int = 1  # the driver's, plus one per unsettled task taking it as input
        self.state: ObjState = ObjState.PENDING
        self.value: Bytes = b""
        self.size: int = 0
        self.holder: Peer | None = None
        self.error: str = ""
        self.waiters: list[TaskRecord] | None = None
        self.task: TaskRecord | None = task  # the producing task, until it settles
        #: Its task's function ID, for people (a dashboard's largest objects); 0: none.
        self.maker: int = task.function if task is not None else 0


class TaskRecord:
    """A submitted task, from submission until it settles."""

    __slots__ = (
        "answered",
        "answers_left",
        "dispatched",
        "event",
        "function",
        "gather",
        "inputs",
        "many",
        "oid",
        "owner",
        "queued",
        "registry",
        "results",
        "retries",
        "slot",
        "sources",
        "span",
        "spare_ns",
        "state",
        "submitted",
        "tally",
        "task_id",
        "value",
        "waiting",
        "worker",
    )

    def __init__(
        self,
        oid: int,
        task_id: int,
        owner: int,
        registry: int,
        results: int,
        event: Task | TaskMany | None,
        now: int,
    ) -> None:
        self.oid: int = oid
        self.task_id: int = task_id
        #: Its function's ID, for people (labels, tallies): the task ID's low bits, or a
        #: by-value task's own (`function_id`); and its row of tallies (`Counts`).
        self.function: int = task_id & TASK_ID_MASK
        self.tally: list[int] = _UNTALLIED  # (until its intake gives it its row)
        self.owner: int = owner
        self.registry: int = registry
        self.results: int = results
        self.event: Task | TaskMany | None = event  # forwarded as is; None for a task-after
        self.inputs: tuple[TrackedObject, ...] = ()
        self.gather: bool = False
        self.many: bool = False  # a task-after with MANY: task-inputs carries the result count
        self.value: Bytes | None = None
        self.waiting: int = 0
        self.state: TaskState = TaskState.NEW
        self.worker: Peer | None = None
        self.retries: int = 0
        self.answers_left: int = 0
        #: Of a task-many's results, those the current attempt answered (None: none yet).
        self.answered: set[int] | None = None
        self.submitted: int = now
        self.queued: int = 0
        self.dispatched: int = 0
        self.span: tuple[int, int, int] = (0, 0, 0)
        self.slot: Slot = Slot.NONE  # the slot of its worker it holds
        #: Its estimate, counted in its worker's `prefetched` in a spare slot.
        self.spare_ns: int = 0
        #: Other workers its stored inputs were on when it was sent (task-inputs): they
        #: fetch from there, so a draining one waits for it before it leaves.
        self.sources: tuple[Peer, ...] = ()

    @property
    def live(self) -> bool:
        """Still worth dispatching (the fair queue skips the rest)."""
        return self.state is TaskState.QUEUED


class CallRecord:
    """A call to an actor, kept until a checkpoint covers it (to run again on a new worker)."""

    __slots__ = ("argument", "method", "oid", "owner", "position", "seq", "state")

    def __init__(self, seq: int, oid: int, method: int, argument: Bytes, owner: int) -> None:
        self.seq: int = seq  # its place in the actor's calls, from 1
        self.oid: int = oid
        self.method: int = method
        self.argument: Bytes = argument
        self.owner: int = owner  # the caller's link
        self.state: CallState = CallState.NEW
        #: Where a head before this one ran it (its answer said, a resume says again): the
        #: replay after a restore from a checkpoint follows these (0: none known).
        self.position: int = 0


class ActorRecord:
    """An actor, from its actor-create until it is killed or lost for good."""

    __slots__ = (
        "actor_id",
        "announced",
        "asked_at",
        "by_oid",
        "callers",
        "calls",
        "capability",
        "checkpoints",
        "claims",
        "covered",
        "covered_of",
        "create",
        "cut",
        "ending",
        "every",
        "failure",
        "gapped",
        "kept_bytes",
        "losses",
        "lossy",
        "lost",
        "moving",
        "newest_from",
        "opened",
        "owner",
        "pending",
        "ran",
        "registry",
        "restarts",
        "restored_covers",
        "restoring",
        "sent",
        "seq",
        "since",
        "state",
        "type_id",
        "unnumbered",
        "warned",
        "why",
        "worker",
    )

    def __init__(self, create: ActorCreate, owner: int, registry: int, now: int) -> None:
        self.actor_id: int = create.object_id
        self.type_id: int = create.task_id
        self.create: ActorCreate = ActorCreate(create.object_id, create.task_id, create.argument)
        self.every: int = create.checkpoint_every or 0
        self.owner: int = owner
        self.registry: int = registry
        self.state: ActorState = ActorState.NEW
        self.why: str = ""
        #: Why a driver's kill ends it (with `KILL_AFTER_CALLS`, once its calls are
        #: answered), or "": a killed actor's drivers hear its end once the removal of its
        #: checkpoints has arrived (`Stores.ended`).
        self.ending: str = ""
        self.since: int = now  # waiting since
        self.worker: Peer | None = None
        self.announced: bool = False  # the owner got its created answer
        #: Restore from the newest checkpoint there is (`RESTORE_NEWEST`): the actor was
        #: created again by a driver resuming after a head restart.
        self.restoring: bool = False
        #: Per caller's number, the newest call ID the head took: a resuming caller's
        #: calls up to it are ones this head has already.
        self.newest_from: dict[int, int] = {}
        self.calls: deque[CallRecord] = deque()  # not covered by a checkpoint, in order
        self.by_oid: dict[int, CallRecord] = {}  # of those, the ones not answered yet
        #: After a head restart, per caller's number, the newest call the checkpoint it came
        #: back from includes; and of its callers' calls, the ones it includes that wait for
        #: their answer, sent again on every start (`_head_actor_covers.py`): not numbered.
        self.restored_covers: dict[int, int] = {}
        #: The most calls a live copy rejoining workers reported has seen (`Hosts.claim`).
        self.ran: int = 0
        self.unnumbered: dict[int, CallRecord] = {}
        self.seq: int = 0  # calls received
        self.sent: int = 0  # calls sent to its current worker
        self.asked_at: int = 0  # the calls the newest checkpoint request covers
        self.covered: int = -1  # the calls the checkpoint it restores from covers (-1: none)
        self.pending: dict[int, list[tuple[int, int]]] = {}  # calls -> drivers' asks
        self.checkpoints: int = 0  # written
        self.failure: str = ""  # why the last checkpoint failed ("" if it did not)
        self.warned: str = ""  # the failure its callers were last warned of
        self.kept_bytes: int = 0
        self.lossy: bool = False  # calls were cut past the budget: no exact rebuild
        #: Moving off a draining worker: the checkpoints asked so that one covers what it
        #: saw (0: not moving); calls wait meanwhile.
        self.moving: int = 0
        #: Its replay after a head restart waits for a call that ran at a place a caller
        #: not back yet may bring (`Actors.hold_gap`): calls wait meanwhile.
        self.gapped: bool = False
        #: Per caller link, (number, ID) of its newest call cut past the budget and not
        #: covered yet: it still hears covered once a checkpoint includes it.
        self.cut: dict[int, tuple[int, int]] = {}
        #: Per caller's number, its newest call a checkpoint includes (covered said so):
        #: said again to a caller resuming on this head (the first may have been lost).
        self.covered_of: dict[int, int] = {}
        self.restarts: int = 0
        self.lost: str = ""  # the last worker it lost, and why
        self.losses: int = 0  # workers lost in a row without an answer in between
        self.callers: set[int] = {owner}  # links that sent it calls
        #: Its creator's capability (its actor-open), None until then (`ActorAccess`).
        self.capability: bytes | None = None
        #: The driver numbers that showed the capability: they may call and kill it.
        self.opened: set[int] = set()
        #: Capabilities shown before the creator's came: number -> what it showed.
        self.claims: dict[int, bytes] = {}
