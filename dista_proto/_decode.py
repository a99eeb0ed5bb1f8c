"""Decoding frame payloads into events, kind by kind.

Theory of operation: a frame's body is the kind, the two IDs, then a payload whose layout
depends on the kind and, for a few kinds, on the direction (actor-create and checkpoint
differ from the head and to it; stats, timeline and status are empty requests one way and
replies the other). So decoding takes ``from_head``.

Decoding is strict: every count is checked against the bytes that remain, flag bits and
role bytes must be known ones, and no bytes may trail a payload. Any violation raises
`RemoteProtocolError` naming the kind and the field.

Each function here decodes one kind (`id_only`, `marked` and `nothing` make the decoder of
a kind with that layout from its event class); the kinds table (`_kinds.py`) says which, and
builds the dispatch dict `DECODERS` from its rows.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import Final

from . import frame as F
from ._conventions import (
    ACTOR_CAPABILITY_SIZE,
    HELLO_SECRET,
    SECRET_SIZE,
    TICKET_SIZE,
    TOKEN_SIZE,
)
from ._errors import RemoteProtocolError
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
    Address,
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
    HeadStats,
    Hello,
    Holding,
    HoldingEntry,
    InlineInput,
    Located,
    LocatedInput,
    Mapped,
    Part,
    Release,
    Result,
    Resume,
    Resumed,
    Span,
    Stats,
    Status,
    Stop,
    Stored,
    Task,
    TaskAfter,
    TaskInput,
    TaskInputs,
    TaskMany,
    TaskNames,
    Timeline,
    TimelineRecord,
    Welcome,
)
from .frame import Bytes

__all__ = [
    "Decoder",
    "actor_call",
    "actor_create",
    "actor_restore",
    "adopt",
    "adopted",
    "checkpoint",
    "checkpointed",
    "covered",
    "error",
    "fetch",
    "hello",
    "holding",
    "id_only",
    "located",
    "marked",
    "nothing",
    "part",
    "result",
    "span",
    "stats",
    "status",
    "stored",
    "task",
    "task_after",
    "task_inputs",
    "task_many",
    "timeline",
    "welcome",
]

#: A frame's object ID, task ID, payload and whether the head sent it, to its event.
Decoder = Callable[[int, int, Bytes, bool], Event]

_U64: Final = struct.Struct("<Q")
_I64: Final = struct.Struct("<q")
_Q2: Final = struct.Struct("<QQ")
_Q3: Final = struct.Struct("<QQQ")
_Q5: Final = struct.Struct("<QQQQQ")
_HELLO: Final = struct.Struct("<BQ")
_RECORD: Final = struct.Struct("<QQQQQQQQQ4sQ")  # a timeline record, 84 bytes
_ENTRY: Final = struct.Struct("<Q4sQ")  # a holding entry, 20 bytes
_KNOWN_FLAGS: Final = F.GATHER | F.WITH_VALUE | F.MANY
_ROLES: Final = frozenset({F.ROLE_DRIVER, F.ROLE_WORKER, F.ROLE_CLIENT, F.ROLE_OBSERVER})


def _fail(kind: int, field: str, why: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"{F.kind_name(kind)}: {field}: {why}", kind=kind, field=field)


def _dotted(ip: bytes) -> str:
    return ".".join(map(str, ip))


class _Reader:
    """A cursor over one payload that names the kind and field in every error."""

    __slots__ = ("buf", "kind", "pos")

    def __init__(self, kind: int, buf: Bytes) -> None:
        self.kind = kind
        self.buf = buf
        self.pos = 0

    def need(self, n: int, field: str) -> None:
        left = len(self.buf) - self.pos
        if n > left:
            raise _fail(self.kind, field, f"needs {n} bytes, {left} remain")

    def u8(self, field: str) -> int:
        self.need(1, field)
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def u64(self, field: str) -> int:
        self.need(8, field)
        v: int = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def i64(self, field: str) -> int:
        self.need(8, field)
        v: int = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def count(self, field: str, item_size: int) -> int:
        """A u64 count of items that must fit in the bytes that remain."""
        n = self.u64(field)
        left = len(self.buf) - self.pos
        if n * item_size > left:
            raise _fail(self.kind, field, f"{n} items of {item_size} bytes, {left} bytes remain")
        return n

    def address(self, field: str) -> Address:
        self.need(F.ADDR_SIZE, field)
        try:
            ip, port, self.pos = F.decode_addr(self.buf, self.pos)
        except RemoteProtocolError as e:
            raise _fail(self.kind, field, str(e)) from None
        return Address(_dotted(ip), port)

    def blob(self, field: str) -> Bytes:
        """A u64 length, then that many bytes."""
        n = self.u64(field)
        self.need(n, field)
        start = self.pos
        self.pos += n
        return self.buf[start : self.pos]

    def raw(self, n: int, field: str) -> bytes:
        """The next ``n`` bytes, as bytes."""
        self.need(n, field)
        start = self.pos
        self.pos += n
        return bytes(self.buf[start : self.pos])

    def rest(self) -> Bytes:
        start, self.pos = self.pos, len(self.buf)
        return self.buf[start:]

    def text(self) -> str:
        return F.message(self.rest())

    def end(self) -> None:
        left = len(self.buf) - self.pos
        if left:
            raise _fail(self.kind, "payload", f"{left} unexpected trailing bytes")


def _exact(kind: int, payload: Bytes, size: int) -> None:
    if len(payload) != size:
        raise _fail(kind, "payload", f"must be {size} bytes, not {len(payload)}")


def task(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    return Task(oid, tid, p)


def result(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    return Result(oid, p, tid)


def error(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    return Error(oid, F.message(p), tid)


def hello(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_HELLO
    r = _Reader(k, p)
    role = r.u8("role")
    if role not in _ROLES:
        raise _fail(k, "role", f"unknown role byte {role}")
    # "An observer says hello without a registry": take its hash, or none at all.
    registry = 0 if role == F.ROLE_OBSERVER and len(p) == 1 else r.u64("registry_hash")
    address = None
    resume = None
    if role == F.ROLE_WORKER:
        address = r.address("address")
    elif role == F.ROLE_DRIVER and len(p) - r.pos >= 16:
        number, epoch = r.u64("resume.number"), r.u64("resume.epoch")
        # Our extension: a resume marked HELLO_SECRET carries the secret after the pair.
        marked = tid & HELLO_SECRET and r.pos < len(p)
        secret = r.raw(SECRET_SIZE, "resume.secret") if marked else b""
        resume = Resume(number, epoch, secret)
    r.end()
    return Hello(role, registry, address, resume, tid)  # the task-ID field: Dista's marks


def welcome(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if tid & HELLO_SECRET:
        _exact(F.KIND_WELCOME, p, 16 + SECRET_SIZE)
        number, epoch = _Q2.unpack_from(p)
        return Welcome(number, epoch, bytes(p[16:]))
    _exact(F.KIND_WELCOME, p, 16)
    number, epoch = _Q2.unpack(p)
    return Welcome(number, epoch)


def _flags(r: _Reader) -> tuple[int, int | None]:
    flags = r.u8("flags")
    if flags & ~_KNOWN_FLAGS:
        raise _fail(r.kind, "flags", f"unknown flag bits {flags & ~_KNOWN_FLAGS:#x}")
    results = None
    if flags & F.MANY:
        results = r.u64("results")
        if results < 1:
            raise _fail(r.kind, "results", "a TaskMany has at least one result")
    return flags, results


def _check_input_count(kind: int, flags: int, n: int) -> None:
    if not flags & F.GATHER and n != 1:
        raise _fail(kind, "count", f"without GATHER a task takes exactly 1 input, not {n}")


def task_after(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_TASK_AFTER
    r = _Reader(k, p)
    flags, results = _flags(r)
    n = r.count("count", 8)
    _check_input_count(k, flags, n)
    start = r.pos
    inputs = struct.unpack_from(f"<{n}Q", p, start) if n else ()
    r.pos = start + 8 * n
    value = r.blob("value") if flags & F.WITH_VALUE else None
    r.end()
    return TaskAfter(oid, tid, inputs, bool(flags & F.GATHER), value, results)


def stored(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    _exact(F.KIND_STORED, p, 8)
    return Stored(oid, _U64.unpack(p)[0])


def located(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    r = _Reader(F.KIND_LOCATED, p)
    address = r.address("address")
    # Our extension: a grant to a driver's fetch token (head to worker).
    token = r.raw(TOKEN_SIZE, "token") if r.pos < len(p) else b""
    r.end()
    return Located(oid, address, token, tid)


def fetch(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    # Our extensions: the part, then a driver's fetch token; a mailbox in the task-ID field.
    if len(p) == 8 + TOKEN_SIZE:
        return Fetch(oid, _U64.unpack_from(p)[0], bytes(p[8:]), tid)
    try:
        part = F.fetch_part(p)
    except RemoteProtocolError as e:
        raise _fail(F.KIND_FETCH, "part", str(e)) from None
    return Fetch(oid, part, b"", tid)


def mapped(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_MAPPED
    _exact(k, p, 8 + TICKET_SIZE)
    size = _U64.unpack_from(p)[0]
    if not 0 < size <= F.MAX_OBJECT:
        raise _fail(k, "size", f"{size} is not in [1, MAX_OBJECT]")
    return Mapped(oid, size, bytes(p[8:]))


def task_names(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_TASK_NAMES
    size = len(p)
    if size % 8:
        raise _fail(k, "names", f"{size} bytes is not a whole number of u64s")
    if size > 8 * F.MAX_TASK_NAMES:
        raise _fail(k, "names", f"{size // 8} names, over MAX_TASK_NAMES ({F.MAX_TASK_NAMES})")
    names = struct.unpack_from(f"<{size // 8}Q", p)
    if any(a >= b for a, b in itertools.pairwise(names)):
        raise _fail(k, "names", "are not in strictly increasing order")
    return TaskNames(names)


def task_inputs(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_TASK_INPUTS
    r = _Reader(k, p)
    flags, results = _flags(r)
    n = r.count("count", 9)  # every input is at least a tag and an ID
    _check_input_count(k, flags, n)
    inputs: list[TaskInput] = []
    for _ in range(n):
        tag = r.u8("inputs.tag")
        input_id = r.u64("inputs.object_id")
        if tag == 0:
            inputs.append(InlineInput(input_id, r.blob("inputs.data")))
        elif tag == 1:
            inputs.append(LocatedInput(input_id, r.address("inputs.address")))
        else:
            raise _fail(k, "inputs.tag", f"unknown input tag {tag}")
    value = r.blob("value") if flags & F.WITH_VALUE else None
    r.end()
    return TaskInputs(oid, tid, tuple(inputs), bool(flags & F.GATHER), value, results)


def marked(
    cls: type[Free | Cancel | ActorKill],
) -> Decoder:
    def decode(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
        _exact(cls.kind, p, 0)
        return cls(oid, tid)  # the task-ID field carries Dista's extension mark

    return decode


def id_only(
    cls: type[Release | Claim],
) -> Decoder:
    def decode(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
        _exact(cls.kind, p, 0)
        return cls(oid)

    return decode


def nothing(cls: type[Resumed | Stop | Drain]) -> Decoder:
    def decode(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
        _exact(cls.kind, p, 0)
        return cls()

    return decode


def stats(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if not from_head:
        _exact(F.KIND_STATS, p, 0)
        return Stats(None, tid)  # the task-ID field: an extension mark (a keepalive)
    _exact(F.KIND_STATS, p, 40)
    return Stats(HeadStats(*_Q5.unpack(p)))


def _addr_of(kind: int, field: str, ip: bytes, port: int) -> Address:
    if port > 0xFFFF:
        raise _fail(kind, field, f"port {port} is not a TCP port")
    return Address(_dotted(ip), port)


def holding(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_HOLDING
    r = _Reader(k, p)
    n = r.count("count", _ENTRY.size)
    entries = []
    for i in range(n):
        object_id, ip, port = _ENTRY.unpack_from(p, r.pos + i * _ENTRY.size)
        entries.append(HoldingEntry(object_id, _addr_of(k, "entries.address", ip, port)))
    r.pos += n * _ENTRY.size
    r.end()
    return Holding(tuple(entries))


def span(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    _exact(F.KIND_SPAN, p, 24)
    arrived, started, ended = _Q3.unpack(p)
    return Span(oid, arrived, started, ended, tid)  # the task-ID field: an extension mark


def timeline(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_TIMELINE
    if not from_head:
        _exact(k, p, 0)
        return Timeline()
    r = _Reader(k, p)
    n = r.count("count", _RECORD.size)
    records = []
    for i in range(n):
        o, t, sub, que, dis, sett, arr, sta, end, ip, port = _RECORD.unpack_from(
            p, r.pos + i * _RECORD.size
        )
        address = _addr_of(k, "records.address", ip, port)
        records.append(TimelineRecord(o, t, sub, que, dis, sett, arr, sta, end, address))
    r.pos += n * _RECORD.size
    r.end()
    return Timeline(tuple(records))


def actor_create(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if from_head:
        return ActorCreate(oid, tid, p)
    r = _Reader(F.KIND_ACTOR_CREATE, p)
    every = r.u64("checkpoint_every")
    return ActorCreate(oid, tid, r.rest(), every)


def actor_call(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    r = _Reader(F.KIND_ACTOR_CALL, p)
    actor = r.u64("actor_id")
    return ActorCall(oid, tid, actor, r.rest())


def checkpoint(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_CHECKPOINT
    _exact(k, p, 8)
    if from_head:
        covers: int = _I64.unpack(p)[0]
        if covers < -1:
            raise _fail(k, "restore_covers", f"must be -1 or a call count, not {covers}")
        return Checkpoint(oid, tid, None, None if covers == -1 else covers)
    return Checkpoint(oid, tid, _U64.unpack(p)[0], None)


def checkpointed(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    return Checkpointed(oid, tid, F.message(p) if len(p) else None)


def actor_restore(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    _exact(F.KIND_ACTOR_RESTORE, p, 8)
    return ActorRestore(oid, tid, _U64.unpack(p)[0])


def actor_order(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_ACTOR_ORDER
    r = _Reader(k, p)
    count = r.u64("count")
    if count * 16 != len(p) - 8:
        raise _fail(k, "count", f"{count} calls in {len(p) - 8} bytes")
    pairs = tuple((r.u64("call"), r.u64("position")) for _ in range(count))
    r.end()
    return ActorOrder(oid, pairs)


def actor_build(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if not tid:
        raise _fail(F.KIND_ACTOR_BUILD, "task_id", "a build number starts at 1")
    _exact(F.KIND_ACTOR_BUILD, p, 8)
    return ActorBuild(oid, tid, _U64.unpack(p)[0])


def actor_open(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    _exact(F.KIND_ACTOR_OPEN, p, ACTOR_CAPABILITY_SIZE)
    return ActorOpen(oid, bytes(p))


def _name(k: int, p: Bytes) -> str:
    if not 1 <= len(p) <= F.MAX_ACTOR_NAME:
        why = f"an actor name is 1 to {F.MAX_ACTOR_NAME} bytes of UTF-8, not {len(p)}"
        raise _fail(k, "name", why)
    try:
        return bytes(p).decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(k, "name", "not UTF-8") from None


def actor_name(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    return ActorName(oid, tid, _name(F.KIND_ACTOR_NAME, p))


def actor_lookup(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if tid:
        raise _fail(F.KIND_ACTOR_LOOKUP, "task_id", f"must be 0, not {tid}")
    return ActorLookup(oid, _name(F.KIND_ACTOR_LOOKUP, p))


def covered(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    _exact(F.KIND_COVERED, p, 8)
    return Covered(oid, _U64.unpack(p)[0])


def status(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if from_head:
        return Status(F.message(p))
    _exact(F.KIND_STATUS, p, 0)
    return Status()


def task_many(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_TASK_MANY
    r = _Reader(k, p)
    n = r.u64("results")
    if n < 1:
        raise _fail(k, "results", "a TaskMany has at least one result")
    return TaskMany(oid, tid, n, r.rest())


def adopt(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    r = _Reader(F.KIND_ADOPT, p)
    address = r.address("address")
    r.end()
    return Adopt(oid, address)


def adopted(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_ADOPTED
    r = _Reader(k, p)
    ok = r.u8("ok")
    if ok == 1:
        address = r.address("address")
        r.end()
        return Adopted(oid, address)
    if ok == 0:
        return Adopted(oid, None, r.text())
    raise _fail(k, "ok", f"must be 0 or 1, not {ok}")


def part(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_PART
    r = _Reader(k, p)
    size = r.u64("size")
    offset = r.u64("offset")
    if size > F.MAX_OBJECT:
        raise _fail(k, "size", f"{size} is over MAX_OBJECT ({F.MAX_OBJECT})")
    data = r.rest()
    if offset + len(data) > size:
        raise _fail(k, "offset", f"{len(data)} bytes at {offset} overrun the object's {size}")
    return Part(oid, size, offset, data)
