"""Encoding events into frame payloads, kind by kind.

An encoder returns the frame's kind and IDs and its payload as a small ``prefix`` (the fixed
fields, built here) plus an optional ``tail`` (an argument, a value, a part's data) that is
sent from where it lies, so a large payload is never copied to be framed. Every range and
every direction rule is checked before anything is returned: an event the protocol cannot
carry raises `LocalProtocolError` and nothing is written.

Each function here encodes one kind (or, for `id_only`, `marked` and `nothing`, the kinds
with the same layout); the kinds table (`_kinds.py`) says which, and builds the dispatch
dict `ENCODERS` from its rows.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from . import frame as F
from ._conventions import (
    ACTOR_CAPABILITY_SIZE,
    HELLO_SECRET,
    SECRET_SIZE,
    TICKET_SIZE,
    TOKEN_SIZE,
)
from ._errors import LocalProtocolError
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
    Fetch,
    Free,
    Hello,
    Holding,
    InlineInput,
    Located,
    Mapped,
    Part,
    Release,
    Result,
    Resumed,
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
    Welcome,
)
from .frame import Bytes

__all__ = [
    "Encoded",
    "Encoder",
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

#: (kind, object_id, task_id, prefix, tail): the payload is the prefix, then the tail.
Encoded = tuple[int, int, int, bytes, Bytes | None]
#: An event (of the kind's class) and whether the head sends it, to its `Encoded` form.
Encoder = Callable[[Any, bool], Encoded]

_U64_MAX: Final = (1 << 64) - 1
_U64: Final = struct.Struct("<Q")
_I64: Final = struct.Struct("<q")
_EMPTY: Final = b""


def _bad(kind: int, field: str, why: str) -> LocalProtocolError:
    return LocalProtocolError(f"{F.kind_name(kind)}: {field}: {why}", kind=kind, field=field)


def _u64(kind: int, field: str, value: int) -> bytes:
    if not 0 <= value <= _U64_MAX:
        raise _bad(kind, field, f"{value} is not a u64")
    return _U64.pack(value)


def _addr(kind: int, field: str, address: Address) -> bytes:
    try:
        return F.encode_addr(address.host, address.port)
    except LocalProtocolError as e:
        raise _bad(kind, field, str(e)) from None


def _text(text: str) -> bytes:
    return text.encode("utf-8", "replace")


def task(e: Task, from_head: bool) -> Encoded:
    return F.KIND_TASK, e.object_id, e.task_id, _EMPTY, e.argument


def result(e: Result, from_head: bool) -> Encoded:
    return result_frame(e.object_id, e.value, e.position)


def result_frame(object_id: int, value: Bytes, position: int) -> Encoded:
    """A result frame from its fields, with no `Result` made (`Links.send_encoded`)."""
    return F.KIND_RESULT, object_id, position, _EMPTY, value


def error(e: Error, from_head: bool) -> Encoded:
    return F.KIND_ERROR, e.object_id, e.mark, _EMPTY, _text(e.message)


def _sized(kind: int, field: str, value: bytes, size: int) -> bytes:
    if len(value) != size:
        raise _bad(kind, field, f"must be {size} bytes, not {len(value)}")
    return bytes(value)


def hello(e: Hello, from_head: bool) -> Encoded:
    k = F.KIND_HELLO
    if e.role not in (F.ROLE_DRIVER, F.ROLE_WORKER, F.ROLE_CLIENT, F.ROLE_OBSERVER):
        raise _bad(k, "role", f"unknown role {e.role}")
    out = bytes([e.role]) + _u64(k, "registry_hash", e.registry_hash)
    if (e.role == F.ROLE_WORKER) != (e.address is not None):
        raise _bad(k, "address", "a worker's hello carries its address, and only a worker's")
    if e.address is not None:
        out += _addr(k, "address", e.address)
    if e.resume is not None:
        if e.role != F.ROLE_DRIVER:
            raise _bad(k, "resume", "only a driver resumes")
        out += _u64(k, "resume.number", e.resume.number) + _u64(k, "resume.epoch", e.resume.epoch)
        if e.resume.secret:
            if not e.mark & HELLO_SECRET:
                raise _bad(k, "resume.secret", "a secret goes only in a hello marked HELLO_SECRET")
            out += _sized(k, "resume.secret", e.resume.secret, SECRET_SIZE)
    # Dista's hello marks ride in the task-ID field, which the page leaves at 0 here.
    return k, 0, _mark(k, e.mark), out, None


def welcome(e: Welcome, from_head: bool) -> Encoded:
    k = F.KIND_WELCOME
    out = _u64(k, "number", e.number) + _u64(k, "epoch", e.epoch)
    if not e.secret:
        return k, 0, 0, out, None
    return k, 0, HELLO_SECRET, out + _sized(k, "secret", e.secret, SECRET_SIZE), None


def _flags_and_counts(
    k: int, gather: bool, value: Bytes | None, results: int | None, n: int
) -> bytearray:
    if not gather and n != 1:
        raise _bad(k, "inputs", f"without gather a task takes exactly 1 input, not {n}")
    flags = (F.GATHER if gather else 0) | (F.WITH_VALUE if value is not None else 0)
    out = bytearray()
    if results is not None:
        if results < 1:
            raise _bad(k, "results", f"a TaskMany has at least one result, not {results}")
        out.append(flags | F.MANY)
        out += _u64(k, "results", results)
    else:
        out.append(flags)
    out += _u64(k, "count", n)
    return out


def task_after(e: TaskAfter, from_head: bool) -> Encoded:
    k = F.KIND_TASK_AFTER
    out = _flags_and_counts(k, e.gather, e.value, e.results, len(e.inputs))
    for input_id in e.inputs:
        out += _u64(k, "inputs", input_id)
    if e.value is None:
        return k, e.object_id, e.task_id, bytes(out), None
    value = F.flat(e.value)
    out += _U64.pack(len(value))
    return k, e.object_id, e.task_id, bytes(out), value


def stored(e: Stored, from_head: bool) -> Encoded:
    return F.KIND_STORED, e.object_id, 0, _u64(F.KIND_STORED, "size", e.size), None


def located(e: Located, from_head: bool) -> Encoded:
    k = F.KIND_LOCATED
    out = _addr(k, "address", e.address)
    if e.token:
        out += _sized(k, "token", e.token, TOKEN_SIZE)
    return k, e.object_id, e.position, out, None


def fetch(e: Fetch, from_head: bool) -> Encoded:
    k = F.KIND_FETCH
    mailbox = e.mailbox  # in the task-ID field
    if not 0 <= mailbox <= _U64_MAX:
        raise _bad(k, "mailbox", f"{mailbox} is not a u64")
    if e.part == 0 and not e.token:
        return k, e.object_id, mailbox, _EMPTY, None
    if e.part < 0:
        raise _bad(k, "part", f"must be 0 (whole) or a positive size, not {e.part}")
    out = _u64(k, "part", e.part)
    if e.token:
        out += _sized(k, "token", e.token, TOKEN_SIZE)
    return k, e.object_id, mailbox, out, None


def mapped(e: Mapped, from_head: bool) -> Encoded:
    k = F.KIND_MAPPED
    if not 0 < e.size <= F.MAX_OBJECT:
        raise _bad(k, "size", f"must be in [1, MAX_OBJECT], not {e.size}")
    return k, e.object_id, 0, _U64.pack(e.size) + _sized(k, "ticket", e.ticket, TICKET_SIZE), None


def task_names(e: TaskNames, from_head: bool) -> Encoded:
    k = F.KIND_TASK_NAMES
    names = e.names
    if len(names) > F.MAX_TASK_NAMES:
        raise _bad(k, "names", f"{len(names)} names, over MAX_TASK_NAMES ({F.MAX_TASK_NAMES})")
    last = -1
    for name in names:
        if not last < name <= _U64_MAX:
            raise _bad(k, "names", "must be u64s in strictly increasing order")
        last = name
    return k, 0, 0, struct.pack(f"<{len(names)}Q", *names), None


def task_inputs(e: TaskInputs, from_head: bool) -> Encoded:
    k = F.KIND_TASK_INPUTS
    out = _flags_and_counts(k, e.gather, e.value, e.results, len(e.inputs))
    for item in e.inputs:
        if isinstance(item, InlineInput):
            out.append(0)
            out += _u64(k, "inputs.object_id", item.object_id)
            data = F.flat(item.data)
            out += _U64.pack(len(data))
            out += data
        else:
            out.append(1)
            out += _u64(k, "inputs.object_id", item.object_id)
            out += _addr(k, "inputs.address", item.address)
    if e.value is None:
        return k, e.object_id, e.task_id, bytes(out), None
    value = F.flat(e.value)
    out += _U64.pack(len(value))
    return k, e.object_id, e.task_id, bytes(out), value


def id_only(e: Release | Claim, from_head: bool) -> Encoded:
    return e.kind, e.object_id, 0, _EMPTY, None


def marked(e: Free | Cancel | ActorKill, from_head: bool) -> Encoded:
    # The extension mark rides in the task-ID field, which the page leaves at 0 for these.
    return e.kind, e.object_id, _mark(e.kind, e.mark), _EMPTY, None


def _mark(kind: int, mark: int) -> int:
    if not 0 <= mark <= _U64_MAX:
        raise _bad(kind, "mark", f"{mark} is not a u64")
    return mark


def nothing(e: Resumed | Stop | Drain, from_head: bool) -> Encoded:
    return e.kind, 0, 0, _EMPTY, None


def stats(e: Stats, from_head: bool) -> Encoded:
    k = F.KIND_STATS
    if not from_head:
        if e.counts is not None:
            raise _bad(k, "counts", "only the head's reply carries counts")
        return k, 0, e.mark, _EMPTY, None
    if e.counts is None:
        raise _bad(k, "counts", "the head's reply carries the five counts")
    out = b"".join(_u64(k, f"counts.{n}", v) for n, v in e.counts._asdict().items())
    return k, 0, 0, out, None


def holding(e: Holding, from_head: bool) -> Encoded:
    k = F.KIND_HOLDING
    out = bytearray(_U64.pack(len(e.entries)))
    for entry in e.entries:
        out += _u64(k, "entries.object_id", entry.object_id)
        out += _addr(k, "entries.address", entry.address)
    return k, 0, 0, bytes(out), None


def span(e: Span, from_head: bool) -> Encoded:
    k = F.KIND_SPAN
    out = _u64(k, "arrived", e.arrived) + _u64(k, "started", e.started)
    return k, e.object_id, _mark(k, e.mark), out + _u64(k, "ended", e.ended), None


def timeline(e: Timeline, from_head: bool) -> Encoded:
    k = F.KIND_TIMELINE
    if not from_head:
        if e.records is not None or e.packed is not None:
            raise _bad(k, "records", "only the head's reply carries records")
        return k, 0, 0, _EMPTY, None
    if e.packed is not None:
        return k, 0, 0, _EMPTY, e.packed  # packed by the head's timeline log: as it lies
    if e.records is None:
        raise _bad(k, "records", "the head's reply carries the records (maybe none)")
    out = bytearray(_U64.pack(len(e.records)))
    for record in e.records:
        for name, value in zip(record._fields[:9], record[:9], strict=True):
            out += _u64(k, f"records.{name}", value)
        out += _addr(k, "records.address", record.address)
    return k, 0, 0, bytes(out), None


def actor_create(e: ActorCreate, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_CREATE
    if from_head:
        if e.checkpoint_every is not None:
            raise _bad(k, "checkpoint_every", "the head's actor-create doesn't carry it")
        return k, e.object_id, e.task_id, _EMPTY, e.argument
    if e.checkpoint_every is None:
        raise _bad(k, "checkpoint_every", "a driver's actor-create carries it (0 for never)")
    every = _u64(k, "checkpoint_every", e.checkpoint_every)
    return k, e.object_id, e.task_id, every, e.argument


def actor_call(e: ActorCall, from_head: bool) -> Encoded:
    return actor_call_frame(e.object_id, e.task_id, e.actor_id, e.argument)


def actor_call_frame(object_id: int, method: int, actor_id: int, argument: Bytes) -> Encoded:
    """An actor-call frame from its fields, with no `ActorCall` made (`Links.send_encoded`)."""
    k = F.KIND_ACTOR_CALL
    return k, object_id, method, _u64(k, "actor_id", actor_id), argument


def checkpoint(e: Checkpoint, from_head: bool) -> Encoded:
    k = F.KIND_CHECKPOINT
    if from_head:
        if e.actor_id is not None:
            raise _bad(k, "actor_id", "the head's checkpoint names the actor by object_id")
        covers = -1 if e.restore_covers is None else e.restore_covers
        if not -1 <= covers <= _U64_MAX // 2:
            raise _bad(k, "restore_covers", f"{covers} is not a call count")
        return k, e.object_id, e.task_id, _I64.pack(covers), None
    if e.actor_id is None or e.restore_covers is not None:
        raise _bad(k, "actor_id", "a driver's checkpoint carries the actor's ID, and only that")
    return k, e.object_id, e.task_id, _u64(k, "actor_id", e.actor_id), None


def checkpointed(e: Checkpointed, from_head: bool) -> Encoded:
    k = F.KIND_CHECKPOINTED
    if e.failure is None:
        return k, e.object_id, e.task_id, _EMPTY, None
    if not e.failure:
        raise _bad(k, "failure", "say why the checkpoint failed (empty means written)")
    return k, e.object_id, e.task_id, _EMPTY, _text(e.failure)


def actor_restore(e: ActorRestore, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_RESTORE
    return k, e.object_id, e.task_id, _u64(k, "covers", e.covers), None


def actor_order(e: ActorOrder, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_ORDER
    out = bytearray(_u64(k, "count", len(e.positions)))
    for oid, position in e.positions:
        out += _u64(k, "call", oid) + _u64(k, "position", position)
    return k, e.object_id, 0, bytes(out), None


def actor_build(e: ActorBuild, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_BUILD
    if e.build <= 0:
        raise _bad(k, "build", f"numbers start at 1, not {e.build}")
    return k, e.object_id, e.build, _u64(k, "epoch", e.epoch), None


def actor_open(e: ActorOpen, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_OPEN
    if len(e.capability) != ACTOR_CAPABILITY_SIZE:
        raise _bad(
            k, "capability", f"must be {ACTOR_CAPABILITY_SIZE} bytes, not {len(e.capability)}"
        )
    return k, e.object_id, 0, bytes(e.capability), None


def _name(k: int, name: str) -> bytes:
    data = name.encode("utf-8")  # (a str that is not UTF-8, lone surrogates: refused)
    if not 1 <= len(data) <= F.MAX_ACTOR_NAME:
        why = f"an actor name is 1 to {F.MAX_ACTOR_NAME} bytes of UTF-8, not {len(data)}"
        raise _bad(k, "name", why)
    return data


def actor_name(e: ActorName, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_NAME
    return k, e.object_id, e.request, _name(k, e.name), None


def actor_lookup(e: ActorLookup, from_head: bool) -> Encoded:
    k = F.KIND_ACTOR_LOOKUP
    return k, e.object_id, 0, _name(k, e.name), None


def covered(e: Covered, from_head: bool) -> Encoded:
    k = F.KIND_COVERED
    return k, e.object_id, 0, _u64(k, "newest", e.newest), None


def status(e: Status, from_head: bool) -> Encoded:
    k = F.KIND_STATUS
    if from_head != (e.text is not None):
        raise _bad(k, "text", "the head's reply carries text, an observer's request none")
    return k, 0, 0, _EMPTY, None if e.text is None else _text(e.text)


def task_many(e: TaskMany, from_head: bool) -> Encoded:
    k = F.KIND_TASK_MANY
    if e.results < 1:
        raise _bad(k, "results", f"a TaskMany has at least one result, not {e.results}")
    return k, e.object_id, e.task_id, _u64(k, "results", e.results), e.argument


def adopt(e: Adopt, from_head: bool) -> Encoded:
    k = F.KIND_ADOPT
    return k, e.object_id, 0, _addr(k, "address", e.address), None


def adopted(e: Adopted, from_head: bool) -> Encoded:
    k = F.KIND_ADOPTED
    if e.address is not None:
        if e.failure:
            raise _bad(k, "failure", "an adopted frame carries an address or a failure, not both")
        return k, e.object_id, 0, b"\x01" + _addr(k, "address", e.address), None
    return k, e.object_id, 0, b"\x00", _text(e.failure)


def part(e: Part, from_head: bool) -> Encoded:
    k = F.KIND_PART
    if not 0 <= e.size <= F.MAX_OBJECT:
        raise _bad(k, "size", f"{e.size} is over MAX_OBJECT ({F.MAX_OBJECT})")
    if e.offset < 0 or e.offset + len(e.data) > e.size:
        raise _bad(k, "offset", f"{len(e.data)} bytes at {e.offset} overrun {e.size}")
    return k, e.object_id, 0, _U64.pack(e.size) + _U64.pack(e.offset), e.data
