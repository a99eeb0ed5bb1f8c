"""Every frame kind in one table: a row per kind, and the lookups built from the rows.

Theory of operation
-------------------
A row (`Kind`) holds what the core knows about a kind apart from its fields' code: its
number (the protocol page's ``frame.KIND_*``) and name, its event class, the functions that
encode and decode its payload, the largest payload it may carry, and the links it may travel
on (`Link`: sender, receiver, and why, when the page's "sent by" column doesn't say so). The
receiving end of a link is the core that handles the kind there (`Kind.receivers`,
`received_by`).

Everything else is derived from the rows once, at import: the codecs' dispatch dicts
(`ENCODERS` by event class, `DECODERS` by kind byte), `frame.KIND_NAMES`, who may send what
to whom (`allowed_kinds`) and the largest body a receiver takes of each kind (`body_limits`,
one list indexed by the kind byte, so a connection checks a header with one lookup). Adding
a kind is its ``frame.KIND_*`` number, its event class, its two codec functions, and one row
here; docs/wire.md's "Kinds at a glance" is rendered from the rows and a test keeps it so
(tests/proto/support/kinds_table.py).

A connection joins two roles. Head links join the head and a peer that said hello (driver,
worker, client or observer); a client (a driver inside a worker) sends and receives what a
driver does, so rows name drivers only. Object-server links join a fetcher (a driver or a
worker fetching an object) and a worker's object server; they carry no hello.

Kinds whose payload the page fixes have that size (a hello at most `HELLO_PAYLOAD` bytes, a
release none, a span 24 bytes ...); kinds that carry a value or a text take up to
`MAX_PAYLOAD`. Stats, timeline and status are empty requests to the head, and replies from
it (``reply``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from . import _decode as D
from . import _encode as E
from . import frame as F
from ._conventions import ACTOR_CAPABILITY_SIZE, SECRET_SIZE, TICKET_SIZE, TOKEN_SIZE
from ._decode import Decoder
from ._encode import Encoder
from ._events import (
    ActorBuild,
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorLookup,
    ActorName,
    ActorOpen,
    ActorOrder,
    ActorRestore,
    Adopt,
    Adopted,
    Cancel,
    Checkpoint,
    Checkpointed,
    Claim,
    Covered,
    Drain,
    Error,
    Event,
    Fetch,
    Free,
    Hello,
    Holding,
    Labels,
    Located,
    Mapped,
    Part,
    Release,
    Result,
    Resumed,
    Snapshot,
    Span,
    Stats,
    Status,
    Stop,
    Stored,
    Task,
    TaskAfter,
    TaskInputs,
    TaskMany,
    TaskNames,
    Timeline,
    Vitals,
    Welcome,
)
from ._roles import Role
from ._watch_frames import (
    decode_labels,
    decode_snapshot,
    decode_vitals,
    encode_labels,
    encode_snapshot,
    encode_vitals,
)

__all__ = [
    "ANY",
    "DECODERS",
    "ENCODERS",
    "HELLO_PAYLOAD",
    "KINDS",
    "SENT_BY",
    "Kind",
    "Link",
    "allowed_kinds",
    "body_limits",
    "by_number",
    "part_limit",
    "received_by",
]

HEAD: Final = Role.HEAD
DRIVER: Final = Role.DRIVER
WORKER: Final = Role.WORKER
OBSERVER: Final = Role.OBSERVER
SERVER: Final = Role.OBJECT_SERVER
FETCHER: Final = Role.FETCHER

#: The largest payload of a kind that carries a value, a text or a list.
ANY: Final = F.MAX_PAYLOAD
#: The largest hello payload: the role byte, the registry hash, then a worker's object
#: server address (12 bytes) or a resuming driver's number and epoch (16 bytes) and, in a
#: hello marked `HELLO_SECRET`, its secret (16 bytes): never both.
HELLO_PAYLOAD: Final = 1 + 8 + max(F.ADDR_SIZE, 8 + 8 + SECRET_SIZE)
#: A welcome: number and epoch, then, marked `HELLO_SECRET`, the driver's secret.
_WELCOME: Final = 8 + 8 + SECRET_SIZE
#: A located frame: an address, then, in a grant to a driver, its fetch token.
_LOCATED: Final = F.ADDR_SIZE + TOKEN_SIZE
#: A fetch: none, the largest part, or the part and a driver's fetch token.
_FETCH: Final = 8 + TOKEN_SIZE
#: A stats reply: `HeadStats`' five u64 counts.
_STATS_REPLY: Final = 5 * 8

#: Why a link exists, for most links: the page's own "sent by" column lists it.
SENT_BY: Final = 'the page\'s "sent by" column'
# ... and the page's prose and the project's decisions, each quoted beside what it adds.
_RESUMING: Final = (
    'a resuming driver sends "a small result or error back as a result or error frame" '
    "(the page, on a head restart)"
)
_EMPTY_FETCH: Final = (
    'a fetcher "that sends an empty fetch ... gets the whole object in one result frame, '
    "or an error frame if it doesn't fit\" (the page, on fetch)"
)
_OBSERVER: Final = (
    "an observer's \"timeline frame gets every driver's finished tasks\" (the page, on observers)"
)
_ANY_PEER: Final = (
    "our decision: the head may say why it refuses or drops any peer before closing "
    '(docs/wire.md, "The head may send error to any peer")'
)
_OPEN: Final = (
    'our extension: "this driver holds a handle to the actor: here is its capability" '
    '(docs/protocol.md, "Actors": who may call and kill an actor)'
)
_BUILD: Final = (
    'our extension: "the actor-create or actor-restore that follows is this head\'s build N" '
    '(docs/protocol.md, "Fenced checkpoints"), to workers with a checkpoint store'
)
_ORDER: Final = (
    'our extension: "my kept calls to this actor ran at these positions" (docs/protocol.md, '
    '"Actors after a head restart"), from a resuming driver'
)
_MAPPED: Final = (
    'our extension: "the object went to your mailbox on this host as a memory file" '
    '(docs/protocol.md, "Extensions: objects mapped on one host"), to a fetcher that named one'
)
_NAMES: Final = (
    'our extension: "these are the tasks I import" (docs/protocol.md, "Extensions: any set '
    'of task modules"), right after hello'
)
_WATCH: Final = (
    'our extension: "what people call these IDs", "how this process is", and a dashboard\'s '
    '"what is the cluster doing?" (docs/protocol.md, "Extensions: the dashboard")'
)
_NAME: Final = (
    'our extension: "the actor this driver creates next is called this", and "which actor '
    'is called this?" (docs/protocol.md, "Named actors")'
)
_GRANT: Final = (
    'our extension: a grant, "the fetcher at this host (or showing this token) may fetch '
    'this object" '
    '(docs/protocol.md, "Extensions: fetch grants")'
)


class Link(NamedTuple):
    """One way a kind may travel: from ``sender`` to ``receiver``, whose core handles it."""

    sender: Role
    receiver: Role
    why: str = SENT_BY


@dataclass(frozen=True)
class Kind:
    """One frame kind: a row of the table."""

    number: int
    name: str
    event: type[Event]
    encode: Encoder
    decode: Decoder
    #: Every link the kind may travel on.
    sent: tuple[Link, ...]
    #: The largest payload, to the head and between a fetcher and an object server.
    payload: int = ANY
    #: The largest payload from the head, when it differs: the reply to an empty request.
    reply: int | None = None

    @property
    def receivers(self) -> frozenset[Role]:
        """The roles whose core handles this kind: the receiving end of its links."""
        return frozenset(link.receiver for link in self.sent)

    def largest(self, from_head: bool) -> int:
        """The largest payload the kind carries in this direction."""
        if from_head and self.reply is not None:
            return self.reply
        return self.payload


# One row per kind. Links are in the page's order; those the page's "sent by" column doesn't
# list say why they exist (the quotes above). A client's links are its driver's.
# fmt: off
KINDS: Final[tuple[Kind, ...]] = (
    #    number                name             event         encode           decode
    Kind(F.KIND_TASK,          "task",          Task,         E.task,          D.task,
         sent=(Link(DRIVER, HEAD), Link(HEAD, WORKER))),
    Kind(F.KIND_RESULT,        "result",        Result,       E.result,        D.result,
         sent=(Link(WORKER, HEAD), Link(HEAD, DRIVER),
               Link(DRIVER, HEAD, _RESUMING), Link(SERVER, FETCHER, _EMPTY_FETCH))),
    Kind(F.KIND_ERROR,         "error",         Error,        E.error,         D.error,
         sent=(Link(WORKER, HEAD), Link(HEAD, DRIVER),
               Link(HEAD, WORKER, _ANY_PEER), Link(HEAD, OBSERVER, _ANY_PEER),
               Link(DRIVER, HEAD, _RESUMING), Link(SERVER, FETCHER, _EMPTY_FETCH))),
    Kind(F.KIND_HELLO,         "hello",         Hello,        E.hello,         D.hello,
         sent=(Link(DRIVER, HEAD), Link(WORKER, HEAD), Link(OBSERVER, HEAD)),
         payload=HELLO_PAYLOAD),
    Kind(F.KIND_WELCOME,       "welcome",       Welcome,      E.welcome,       D.welcome,
         sent=(Link(HEAD, DRIVER),), payload=_WELCOME),  # number, epoch (, secret)
    Kind(F.KIND_TASK_AFTER,    "task-after",    TaskAfter,    E.task_after,    D.task_after,
         sent=(Link(DRIVER, HEAD),)),
    Kind(F.KIND_STORED,        "stored",        Stored,       E.stored,        D.stored,
         sent=(Link(WORKER, HEAD),), payload=8),  # size
    Kind(F.KIND_LOCATED,       "located",       Located,      E.located,       D.located,
         sent=(Link(HEAD, DRIVER), Link(HEAD, WORKER, _GRANT)), payload=_LOCATED),
    Kind(F.KIND_FETCH,         "fetch",         Fetch,        E.fetch,         D.fetch,
         sent=(Link(FETCHER, SERVER),), payload=_FETCH),  # none, or the part (, token)
    Kind(F.KIND_TASK_INPUTS,   "task-inputs",   TaskInputs,   E.task_inputs,   D.task_inputs,
         sent=(Link(HEAD, WORKER),)),
    Kind(F.KIND_RELEASE,       "release",       Release,      E.id_only,       D.id_only(Release),
         sent=(Link(DRIVER, HEAD),), payload=0),
    Kind(F.KIND_FREE,          "free",          Free,         E.marked,        D.marked(Free),
         sent=(Link(HEAD, WORKER),), payload=0),
    Kind(F.KIND_STATS,         "stats",         Stats,        E.stats,         D.stats,
         sent=(Link(DRIVER, HEAD), Link(HEAD, DRIVER)), payload=0, reply=_STATS_REPLY),
    Kind(F.KIND_HOLDING,       "holding",       Holding,      E.holding,       D.holding,
         sent=(Link(WORKER, HEAD),)),
    Kind(F.KIND_CLAIM,         "claim",         Claim,        E.id_only,       D.id_only(Claim),
         sent=(Link(DRIVER, HEAD),), payload=0),
    Kind(F.KIND_RESUMED,       "resumed",       Resumed,      E.nothing,       D.nothing(Resumed),
         sent=(Link(DRIVER, HEAD),), payload=0),
    Kind(F.KIND_SPAN,          "span",          Span,         E.span,          D.span,
         sent=(Link(WORKER, HEAD),), payload=24),  # arrived, started, ended
    Kind(F.KIND_TIMELINE,      "timeline",      Timeline,     E.timeline,      D.timeline,
         sent=(Link(DRIVER, HEAD), Link(HEAD, DRIVER),
               Link(OBSERVER, HEAD, _OBSERVER), Link(HEAD, OBSERVER, _OBSERVER)),
         payload=0, reply=ANY),
    Kind(F.KIND_ACTOR_CREATE,  "actor-create",  ActorCreate,  E.actor_create,  D.actor_create,
         sent=(Link(DRIVER, HEAD), Link(HEAD, WORKER))),
    Kind(F.KIND_ACTOR_CALL,    "actor-call",    ActorCall,    E.actor_call,    D.actor_call,
         sent=(Link(DRIVER, HEAD), Link(HEAD, WORKER))),
    Kind(F.KIND_ACTOR_KILL,    "actor-kill",    ActorKill,    E.marked,        D.marked(ActorKill),
         sent=(Link(DRIVER, HEAD), Link(HEAD, WORKER)), payload=0),
    Kind(F.KIND_CHECKPOINT,    "checkpoint",    Checkpoint,   E.checkpoint,    D.checkpoint,
         sent=(Link(DRIVER, HEAD), Link(HEAD, WORKER)),
         payload=8),  # the actor's ID, or the calls a restore covers
    Kind(F.KIND_CHECKPOINTED,  "checkpointed",  Checkpointed, E.checkpointed,  D.checkpointed,
         sent=(Link(WORKER, HEAD),)),
    Kind(F.KIND_ACTOR_RESTORE, "actor-restore", ActorRestore, E.actor_restore, D.actor_restore,
         sent=(Link(HEAD, WORKER),), payload=8),  # the calls the checkpoint covers
    Kind(F.KIND_COVERED,       "covered",       Covered,      E.covered,       D.covered,
         sent=(Link(HEAD, DRIVER),), payload=8),  # the newest call covered
    Kind(F.KIND_STATUS,        "status",        Status,       E.status,        D.status,
         sent=(Link(OBSERVER, HEAD), Link(HEAD, OBSERVER)), payload=0, reply=ANY),
    Kind(F.KIND_STOP,          "stop",          Stop,         E.nothing,       D.nothing(Stop),
         sent=(Link(OBSERVER, HEAD), Link(HEAD, WORKER)), payload=0),
    Kind(F.KIND_TASK_MANY,     "task-many",     TaskMany,     E.task_many,     D.task_many,
         sent=(Link(DRIVER, HEAD), Link(HEAD, WORKER))),
    Kind(F.KIND_DRAIN,         "drain",         Drain,        E.nothing,       D.nothing(Drain),
         sent=(Link(WORKER, HEAD),), payload=0),
    Kind(F.KIND_ADOPT,         "adopt",         Adopt,        E.adopt,         D.adopt,
         sent=(Link(HEAD, WORKER),), payload=F.ADDR_SIZE),
    Kind(F.KIND_ADOPTED,       "adopted",       Adopted,      E.adopted,       D.adopted,
         sent=(Link(WORKER, HEAD),)),
    Kind(F.KIND_CANCEL,        "cancel",        Cancel,       E.marked,        D.marked(Cancel),
         sent=(Link(DRIVER, HEAD),), payload=0),
    # A part's largest payload is the default before a fetcher asks for a size (`part_limit`).
    Kind(F.KIND_PART,          "part",          Part,         E.part,          D.part,
         sent=(Link(SERVER, FETCHER),), payload=F.PART_HEADER + F.PART_SIZE),
    # Dista's own kind (only our peers send it): an actor's capability, from a handle.
    Kind(F.KIND_ACTOR_OPEN,    "actor-open",    ActorOpen,    E.actor_open,    D.actor_open,
         sent=(Link(DRIVER, HEAD, _OPEN),), payload=ACTOR_CAPABILITY_SIZE),
    # Dista's own kinds: an actor's name, and a look-up by name (answered by result/error).
    Kind(F.KIND_ACTOR_NAME,    "actor-name",    ActorName,    E.actor_name,    D.actor_name,
         sent=(Link(DRIVER, HEAD, _NAME),), payload=F.MAX_ACTOR_NAME),
    Kind(F.KIND_ACTOR_LOOKUP,  "actor-lookup",  ActorLookup,  E.actor_lookup,  D.actor_lookup,
         sent=(Link(DRIVER, HEAD, _NAME),), payload=F.MAX_ACTOR_NAME),
    # Dista's own kind: the build number of the actor-create or actor-restore that follows.
    Kind(F.KIND_ACTOR_BUILD,   "actor-build",   ActorBuild,   E.actor_build,   D.actor_build,
         sent=(Link(HEAD, WORKER, _BUILD),), payload=8),  # the head's epoch
    # Dista's own kind: a resuming driver's kept calls' positions in the actor's order.
    Kind(F.KIND_ACTOR_ORDER,   "actor-order",   ActorOrder,   E.actor_order,   D.actor_order,
         sent=(Link(DRIVER, HEAD, _ORDER),)),
    # Dista's own kind: an object sent to a fetcher's mailbox on the same host.
    Kind(F.KIND_MAPPED,        "mapped",        Mapped,       E.mapped,        D.mapped,
         sent=(Link(SERVER, FETCHER, _MAPPED),), payload=8 + TICKET_SIZE),  # size, ticket
    # Dista's own kind: the tasks a driver or worker imports, by their names' hashes.
    Kind(F.KIND_TASK_NAMES,    "task-names",    TaskNames,    E.task_names,    D.task_names,
         sent=(Link(DRIVER, HEAD, _NAMES), Link(WORKER, HEAD, _NAMES)),
         payload=8 * F.MAX_TASK_NAMES),
    # Dista's own kinds, for people: labels of IDs, a process's vitals, a dashboard's snapshot.
    Kind(F.KIND_LABELS,        "labels",        Labels,       encode_labels,   decode_labels,
         sent=(Link(DRIVER, HEAD, _WATCH), Link(OBSERVER, HEAD, _WATCH),
               Link(HEAD, OBSERVER, _WATCH)),
         payload=4 + F.MAX_LABELS * (10 + F.MAX_LABEL)),
    Kind(F.KIND_VITALS,        "vitals",        Vitals,       encode_vitals,   decode_vitals,
         sent=(Link(DRIVER, HEAD, _WATCH), Link(WORKER, HEAD, _WATCH)), payload=40),
    Kind(F.KIND_SNAPSHOT,      "snapshot",      Snapshot,     encode_snapshot, decode_snapshot,
         sent=(Link(OBSERVER, HEAD, _WATCH), Link(HEAD, OBSERVER, _WATCH)),
         payload=0, reply=ANY),
)
# fmt: on

# -- derived once, at import -------------------------------------------------------------------

_BY_NUMBER: Final = {kind.number: kind for kind in KINDS}
ENCODERS: Final[dict[type[Any], Encoder]] = {kind.event: kind.encode for kind in KINDS}
DECODERS: Final[dict[int, Decoder]] = {kind.number: kind.decode for kind in KINDS}
# frame holds the names the page's API has, but can't import this table (built on frame).
F.KIND_NAMES.update((kind.number, kind.name) for kind in KINDS)


def _as_client(role: Role) -> Role:
    return Role.CLIENT if role == DRIVER else role


def _who_sends() -> dict[tuple[Role, Role], frozenset[int]]:
    table: dict[tuple[Role, Role], set[int]] = {}
    for kind in KINDS:
        for sender, receiver, _ in kind.sent:
            table.setdefault((sender, receiver), set()).add(kind.number)
            # A client is treated as a driver, both ways.
            client = (_as_client(sender), _as_client(receiver))
            if client != (sender, receiver):
                table.setdefault(client, set()).add(kind.number)
    return {pair: frozenset(kinds) for pair, kinds in table.items()}


_SENDS: Final = _who_sends()
_LIMITS: dict[tuple[Role, Role, frozenset[int]], tuple[int, ...]] = {}


def by_number(number: int) -> Kind:
    """The row of kind ``number``; `KeyError` for a kind the page doesn't define."""
    return _BY_NUMBER[number]


def allowed_kinds(sender: Role, receiver: Role) -> frozenset[int]:
    """The kinds ``sender`` may send to ``receiver`` (empty if they never talk)."""
    return _SENDS.get((sender, receiver), frozenset())


def received_by(role: Role) -> frozenset[int]:
    """The kinds ``role``'s core handles: every kind some peer may send it."""
    return frozenset(
        k for (_, receiver), kinds in _SENDS.items() if receiver == role for k in kinds
    )


def body_limits(sender: Role, receiver: Role, kinds: frozenset[int] | None = None) -> list[int]:
    """The largest body ``receiver`` takes from ``sender``, indexed by kind byte (256 of
    them); 0 for a kind not in ``kinds`` (by default, every kind ``sender`` may send)."""
    if kinds is None:
        kinds = allowed_kinds(sender, receiver)
    key = (sender, receiver, kinds)
    limits = _LIMITS.get(key)
    if limits is None:
        from_head = sender == HEAD
        table = [0] * 256
        for kind in kinds:
            table[kind] = F.HEADER + _BY_NUMBER[kind].largest(from_head)
        limits = _LIMITS[key] = tuple(table)
    return list(limits)


def part_limit(part: int) -> int:
    """The largest part frame body for a fetcher that asked for parts of ``part`` bytes."""
    return F.HEADER + F.PART_HEADER + F.part_payload_size(part)
