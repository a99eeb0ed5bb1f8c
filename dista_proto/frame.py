"""The wire format: length-prefixed frames, exactly as the protocol page defines them.

This module keeps the names of the original ``dista.frame`` API so that anyone holding the
protocol page can use it directly. Every frame is a 4-byte little-endian body length, then the
body: the kind byte, the object ID (u64), the task ID (u64) and the payload. Every integer on
the wire is little-endian.

Functions that prepare bytes to send raise `LocalProtocolError` and write nothing when the
frame cannot be carried; functions that read bytes from a peer raise `RemoteProtocolError`.
The typed events and `Connection` exported by `dista_proto` are built on this module.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, cast, overload

from ._errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "ADDR_SIZE",
    "GATHER",
    "HEADER",
    "KIND_ACTOR_CALL",
    "KIND_ACTOR_CREATE",
    "KIND_ACTOR_KILL",
    "KIND_ACTOR_LOOKUP",
    "KIND_ACTOR_BUILD",
    "KIND_ACTOR_ORDER",
    "KIND_ACTOR_NAME",
    "KIND_ACTOR_OPEN",
    "KIND_ACTOR_RESTORE",
    "KIND_ADOPT",
    "KIND_ADOPTED",
    "KIND_CANCEL",
    "KIND_CHECKPOINT",
    "KIND_CHECKPOINTED",
    "KIND_CLAIM",
    "KIND_COVERED",
    "KIND_DRAIN",
    "KIND_ERROR",
    "KIND_FETCH",
    "KIND_FREE",
    "KIND_HELLO",
    "KIND_HOLDING",
    "KIND_LOCATED",
    "KIND_MAPPED",
    "KIND_TASK_NAMES",
    "MAX_TASK_NAMES",
    "KIND_LABELS",
    "MAX_LABELS",
    "MAX_LABEL",
    "KIND_VITALS",
    "KIND_SNAPSHOT",
    "KIND_NAMES",
    "KIND_PART",
    "KIND_RELEASE",
    "KIND_RESULT",
    "KIND_RESUMED",
    "KIND_SPAN",
    "KIND_STATS",
    "KIND_STATUS",
    "KIND_STOP",
    "KIND_STORED",
    "KIND_TASK",
    "KIND_TASK_AFTER",
    "KIND_TASK_INPUTS",
    "KIND_TASK_MANY",
    "KIND_TIMELINE",
    "KIND_WELCOME",
    "MANY",
    "MAX_ACTOR_NAME",
    "MAX_FRAME",
    "MAX_OBJECT",
    "MAX_PAYLOAD",
    "PART_HEADER",
    "PART_SIZE",
    "PREFIX",
    "ROLE_CLIENT",
    "ROLE_DRIVER",
    "ROLE_OBSERVER",
    "ROLE_WORKER",
    "Bytes",
    "Frame",
    "Parts",
    "WITH_VALUE",
    "append_frame",
    "append_header",
    "append_part_header",
    "append_parts",
    "check_payload",
    "decode_addr",
    "encode_addr",
    "flat",
    "fetch_part",
    "fetch_payload",
    "frame_length",
    "kind_name",
    "message",
    "parse_body",
    "part_payload_size",
]

#: Anything the wire layer accepts as bytes (``collections.abc.Buffer`` needs Python 3.12).
Bytes = bytes | bytearray | memoryview

KIND_TASK: Final = 1
KIND_RESULT: Final = 2
KIND_ERROR: Final = 3
KIND_HELLO: Final = 4
KIND_WELCOME: Final = 5
KIND_TASK_AFTER: Final = 6
KIND_STORED: Final = 7
KIND_LOCATED: Final = 8
KIND_FETCH: Final = 9
KIND_TASK_INPUTS: Final = 10
KIND_RELEASE: Final = 11
KIND_FREE: Final = 12
KIND_STATS: Final = 13
KIND_HOLDING: Final = 14
KIND_CLAIM: Final = 15
KIND_RESUMED: Final = 16
KIND_SPAN: Final = 17
KIND_TIMELINE: Final = 18
KIND_ACTOR_CREATE: Final = 19
KIND_ACTOR_CALL: Final = 20
KIND_ACTOR_KILL: Final = 21
KIND_CHECKPOINT: Final = 22
KIND_CHECKPOINTED: Final = 23
KIND_ACTOR_RESTORE: Final = 24
KIND_COVERED: Final = 25
KIND_STATUS: Final = 26
KIND_STOP: Final = 27
KIND_TASK_MANY: Final = 28
#: Worker to head: told to stop (SIGTERM), so send it no more work and move what it holds.
KIND_DRAIN: Final = 29
#: Head to worker: fetch the object from a draining worker's location and keep it.
KIND_ADOPT: Final = 30
#: Worker to head: 1 and the object's new location, or 0 and why it couldn't take it.
KIND_ADOPTED: Final = 31
#: Driver to head: this driver won't read the object; its task fails with "cancelled".
KIND_CANCEL: Final = 32
#: Worker to a fetcher: one part of an object too large for one frame.
KIND_PART: Final = 33
#: Dista's extension, driver or client to head: open an actor with the capability its
#: creator drew (a handle carries it); only its creator and those who opened it may call or
#: kill it. A peer that knows only the page never sends it.
KIND_ACTOR_OPEN: Final = 34
#: Dista's extension, driver or client to head: name the actor (object ID) it creates; the
#: task-ID field is the request ID the head answers (result or error), the payload the name.
KIND_ACTOR_NAME: Final = 36
#: Dista's extension, driver or client to head: look an actor up by name (payload); the
#: head answers the request ID (object ID) with a result (actor ID, type ID, capability).
KIND_ACTOR_LOOKUP: Final = 37
#: Dista's extension, head to a worker with a checkpoint store, just before actor-create or
#: actor-restore: the build's number in this head's order (task-ID field, from 1) and the
#: head's epoch (payload, u64), so that the store orders builds as the heads decided them.
KIND_ACTOR_BUILD: Final = 38
#: Dista's extension, a resuming driver or client to head: where its kept calls to the actor
#: (object ID) ran in its order: a count u64, then per call its ID u64 and position u64.
KIND_ACTOR_ORDER: Final = 39
#: Dista's extension, object server to a fetcher on its host that named a mailbox (a fetch
#: whose task-ID field is not 0): the object (object ID) went to that mailbox as a sealed
#: memory file; the payload is its size u64, then the ticket (16 bytes) it went with.
KIND_MAPPED: Final = 40
#: Dista's extension, a driver or worker to head, right after its hello: the tasks it
#: imports, as their names' hashes (u64 each, strictly increasing), so that a worker serves
#: every driver whose tasks it has, not only one whose registry hash equals its own.
KIND_TASK_NAMES: Final = 41
#: The most task names a task-names frame carries.
MAX_TASK_NAMES: Final = 1 << 16
#: The longest actor name, in bytes of UTF-8.
MAX_ACTOR_NAME: Final = 255
#: Dista's extension, a driver to head: what people call some IDs (tasks' functions, actor
#: classes and their methods): a count u32, then per entry the ID u64, its label's length
#: u16 and the label (UTF-8). An observer's empty one asks for every label the head knows
#: from the one numbered by the task-ID field on; the head answers with a labels frame whose
#: task-ID field is the count it knows.
KIND_LABELS: Final = 42
#: The most entries a labels frame carries, and the longest label (bytes of UTF-8).
MAX_LABELS: Final = 1 << 12
MAX_LABEL: Final = 200
#: Dista's extension, a driver or worker to head, now and then: its process ID, resident
#: memory in bytes, and (workers) the checkpoints it wrote, their bytes and nanoseconds
#: spent, since it started: five u64s.
KIND_VITALS: Final = 43
#: Dista's extension, observer to head: a snapshot of the head's state for a dashboard,
#: with the timeline records after the one numbered by the object-ID field (the payload
#: empty). The head's answer: its state as a JSON document (a u32 length, then UTF-8), then
#: the records (`SNAPSHOT_ROW` each, see docs/protocol.md "Extensions: the dashboard").
KIND_SNAPSHOT: Final = 44

#: Task-after and task-inputs flag: the inputs gather into a Seq.
GATHER: Final = 1
#: Task-after and task-inputs flag: an encoded value goes before them.
WITH_VALUE: Final = 2
#: Task-after and task-inputs flag: a TaskMany; the number of its results follows the flags.
MANY: Final = 4

ADDR_SIZE: Final = 12
ROLE_DRIVER: Final = 1
ROLE_WORKER: Final = 2
#: A driver inside a worker: treated as a driver, but it doesn't keep a local-mode head alive.
ROLE_CLIENT: Final = 3
ROLE_OBSERVER: Final = 4

#: The body's fixed start: kind (1), object ID (8), task ID (8).
HEADER: Final = 17
#: The length prefix before every body.
PREFIX: Final = 4
#: The largest frame body a receiver takes: the kind, the IDs and the payload.
MAX_FRAME: Final = 1 << 30
MAX_PAYLOAD: Final = MAX_FRAME - HEADER
#: The largest part a fetcher asks for: an object larger than this comes in parts of it.
PART_SIZE: Final = 64 << 20
#: A part frame announcing an object larger than this is garbage.
MAX_OBJECT: Final = 1 << 40
#: A part frame's payload starts with the object's size and the part's offset, two u64.
PART_HEADER: Final = 16

_U64_MAX: Final = (1 << 64) - 1

#: The protocol page's name of every kind, by number ("task-after" for `KIND_TASK_AFTER`).
#: Filled from the kinds table (`dista_proto._kinds`, one row per kind) as `dista_proto` is
#: imported: the table is built of the events and codecs, which are built on this module.
KIND_NAMES: Final[dict[int, str]] = {}

# The length prefix and the body's header in one pack: length u32, kind u8, two u64.
_PREFIX_HEADER: Final = struct.Struct("<IBQQ")
_BODY_HEADER: Final = struct.Struct("<BQQ")
_PART_FIELDS: Final = struct.Struct("<QQ")
_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")


def kind_name(kind: int) -> str:
    """The protocol page's name for a kind, or ``kind N`` for one it doesn't define."""
    return KIND_NAMES.get(kind, f"kind {kind}")


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: its kind, its two IDs and its undecoded payload."""

    kind: int
    object_id: int
    task_id: int
    payload: Bytes

    def take_payload(self) -> Bytes:
        """The payload, as it lies: no copy is made."""
        return self.payload


def flat(payload: Bytes) -> Bytes:
    """``payload`` as a flat run of bytes: a 1-D byte view, copying only if not contiguous."""
    if isinstance(payload, memoryview) and (payload.ndim != 1 or payload.itemsize != 1):
        return payload.cast("B") if payload.c_contiguous else payload.tobytes()
    if isinstance(payload, memoryview) and not payload.c_contiguous:
        return payload.tobytes()
    return payload


def message(payload: Bytes) -> str:
    """An error frame's text; bytes that aren't UTF-8 become replacement characters."""
    return bytes(payload).decode("utf-8", "replace")


def check_payload(n: int) -> None:
    """Raise `LocalProtocolError` unless a frame can carry a payload of ``n`` bytes."""
    if n < 0 or n > MAX_PAYLOAD:
        raise LocalProtocolError(
            f"a frame carries at most {MAX_PAYLOAD} payload bytes, not {n}; "
            "send a larger object in part frames"
        )


def _check_ids(kind: int, object_id: int, task_id: int) -> None:
    if not 0 <= kind <= 255:
        raise LocalProtocolError(f"frame kind must be a byte, not {kind}", kind=kind)
    if not 0 <= object_id <= _U64_MAX:
        raise LocalProtocolError(
            f"{kind_name(kind)}: object ID {object_id} is not a u64", kind=kind, field="object_id"
        )
    if not 0 <= task_id <= _U64_MAX:
        raise LocalProtocolError(
            f"{kind_name(kind)}: task ID {task_id} is not a u64", kind=kind, field="task_id"
        )


def append_header(out: bytearray, kind: int, object_id: int, task_id: int, size: int) -> None:
    """Append a frame's length and header for a ``size``-byte payload the caller appends."""
    check_payload(size)
    _check_ids(kind, object_id, task_id)
    out += _PREFIX_HEADER.pack(HEADER + size, kind, object_id, task_id)


def append_frame(out: bytearray, kind: int, object_id: int, task_id: int, payload: Bytes) -> None:
    """Append one whole frame; raise, appending nothing, if the payload is too large."""
    payload = flat(payload)
    append_header(out, kind, object_id, task_id, len(payload))
    out += payload


def part_payload_size(part: int) -> int:
    """The object bytes one part frame carries for a fetch asking for parts of ``part``.

    A fetcher may ask for more than a frame holds; the part is then cut to what fits.
    """
    if part < 1:
        raise LocalProtocolError(f"a part must be at least 1 byte, not {part}", kind=KIND_PART)
    return min(part, MAX_PAYLOAD - PART_HEADER)


def append_part_header(out: bytearray, object_id: int, total: int, offset: int, n: int) -> None:
    """Append a part frame's length, header and part fields for ``n`` bytes at ``offset``."""
    if not 0 <= total <= MAX_OBJECT:
        raise LocalProtocolError(
            f"part: an object of {total} bytes is larger than MAX_OBJECT ({MAX_OBJECT})",
            kind=KIND_PART,
            field="size",
        )
    if offset < 0 or n < 0 or offset + n > total:
        raise LocalProtocolError(
            f"part: {n} bytes at offset {offset} don't fit an object of {total}",
            kind=KIND_PART,
            field="offset",
        )
    append_header(out, KIND_PART, object_id, 0, PART_HEADER + n)
    out += _PART_FIELDS.pack(total, offset)


def append_parts(out: bytearray, object_id: int, data: Bytes, part: int) -> None:
    """Append ``data`` as part frames carrying at most ``part`` object bytes each."""
    step = part_payload_size(part)
    view = memoryview(data).cast("B")
    total = len(view)
    check_start = len(out)
    try:
        for offset in range(0, max(total, 1), step):
            chunk = view[offset : offset + step]
            append_part_header(out, object_id, total, offset, len(chunk))
            out += chunk
    except LocalProtocolError:
        del out[check_start:]
        raise


def fetch_payload(part: int = PART_SIZE) -> bytes:
    """A fetch frame's payload: the largest part this fetcher takes."""
    if not 1 <= part <= _U64_MAX:
        raise LocalProtocolError(
            f"fetch: part must be a positive u64, not {part}", kind=KIND_FETCH
        )
    return _U64.pack(part)


def fetch_part(payload: Bytes) -> int:
    """The largest part a fetch asks for; 0 for an empty fetch (the whole object, one frame)."""
    if len(payload) == 0:
        return 0
    if len(payload) != 8:
        raise RemoteProtocolError(
            f"fetch: payload must be empty or one u64, not {len(payload)} bytes",
            kind=KIND_FETCH,
            field="part",
        )
    part: int = _U64.unpack(payload)[0]
    return part


def frame_length(head: Bytes) -> int:
    """The body length a 4-byte frame prefix announces, checked against HEADER and MAX_FRAME."""
    if len(head) < PREFIX:
        raise RemoteProtocolError(f"a frame prefix is 4 bytes, not {len(head)}")
    length: int = _U32.unpack_from(head)[0]
    if length < HEADER:
        raise RemoteProtocolError(
            f"frame length {length} is shorter than the {HEADER}-byte header"
        )
    if length > MAX_FRAME:
        raise RemoteProtocolError(f"frame length {length} is over MAX_FRAME ({MAX_FRAME})")
    return length


def parse_body(body: Bytes) -> Frame:
    """A frame from its body (everything after the length prefix); the payload is a view."""
    if len(body) < HEADER:
        raise RemoteProtocolError(f"a frame body is at least {HEADER} bytes, not {len(body)}")
    kind, object_id, task_id = _BODY_HEADER.unpack_from(body)
    return Frame(kind, object_id, task_id, memoryview(body)[HEADER:])


def encode_addr(ip: Bytes | str, port: int) -> bytes:
    """An address as frames carry it: the four IPv4 bytes, then the port as a u64."""
    raw = _ip_bytes(ip)
    if not 0 <= port <= 0xFFFF:
        raise LocalProtocolError(f"port {port} is not a TCP port (0..65535)", field="port")
    return raw + _U64.pack(port)


def decode_addr(buf: Bytes, pos: int = 0) -> tuple[bytes, int, int]:
    """Read an address written by `encode_addr`: ``(ip, port, new_pos)``."""
    end = pos + ADDR_SIZE
    if pos < 0 or end > len(buf):
        raise RemoteProtocolError(
            f"an address needs {ADDR_SIZE} bytes at offset {pos}, {max(len(buf) - pos, 0)} remain",
            field="address",
        )
    ip = bytes(buf[pos : pos + 4])
    port: int = _U64.unpack_from(buf, pos + 4)[0]
    if port > 0xFFFF:
        raise RemoteProtocolError(f"address port {port} is not a TCP port", field="address")
    return ip, port, end


def _ip_bytes(ip: Bytes | str) -> bytes:
    if isinstance(ip, str):
        pieces = ip.split(".")
        try:
            raw = bytes(int(p) for p in pieces) if len(pieces) == 4 else b""
        except ValueError:
            raw = b""
        if len(raw) != 4 or not all(p.isdigit() for p in pieces):
            raise LocalProtocolError(f"{ip!r} is not a dotted IPv4 address", field="address")
        return raw
    raw = bytes(ip)
    if len(raw) != 4:
        raise LocalProtocolError(f"an IPv4 address is 4 bytes, not {len(raw)}", field="address")
    return raw


#: The buffer type a `Parts` allocator returns.
_Buffer = TypeVar("_Buffer", bound=bytearray | memoryview)


class Parts(Generic[_Buffer]):
    """An object arriving in part frames: `add` each payload in order, then `take` it.

    The object's buffer is allocated once, when the first part announces the size, by
    ``allocate`` (``bytearray`` unless a binding passes, say, an mmap-backed allocator: any
    writable buffer, as a bytearray or a memoryview, of at least the size asked for).

    A part may also be received in place: `reserve` checks its fields as `add_part` would
    and returns the view of the buffer its bytes go to; once they are there, `add_part`
    with that very view as ``data`` records it without copying. Parts are reserved, and
    then added, in order; a part reserved before the one added now stays reserved.
    """

    __slots__ = ("_allocate", "_reserved", "data", "received", "reserved", "size")

    @overload
    def __init__(self: Parts[bytearray]) -> None: ...
    @overload
    def __init__(self, allocate: Callable[[int], _Buffer]) -> None: ...
    def __init__(self, allocate: Callable[[int], Any] = bytearray) -> None:
        self._allocate: Callable[[int], _Buffer] = allocate
        self.data: _Buffer = cast(_Buffer, bytearray())
        self.size: int = -1  # unknown until the first part arrives
        self.received: int = 0
        #: Where the next reserved part starts (the end of what is received or reserved).
        self.reserved: int = 0
        self._reserved: deque[memoryview] = deque()  # reserved, not yet added, in order

    def add(self, payload: Bytes) -> bool:
        """Add one part frame's payload; whether the object is now whole."""
        if len(payload) < PART_HEADER:
            raise RemoteProtocolError(
                f"part: payload of {len(payload)} bytes is shorter than size and offset",
                kind=KIND_PART,
                field="size",
            )
        size, offset = _PART_FIELDS.unpack_from(payload)
        return self.add_part(size, offset, memoryview(payload)[PART_HEADER:])

    def _check(self, size: int, offset: int, n: int, expected: int) -> int:
        """Check a part of ``n`` bytes at ``offset`` (allocating on the first); its end."""
        if size > MAX_OBJECT:
            raise RemoteProtocolError(
                f"part: announced size {size} is over MAX_OBJECT ({MAX_OBJECT})",
                kind=KIND_PART,
                field="size",
            )
        if self.size < 0:
            self.data = self._allocate(size)
            self.size = size
        elif size != self.size:
            raise RemoteProtocolError(
                f"part: size changed from {self.size} to {size}", kind=KIND_PART, field="size"
            )
        if offset != expected:
            raise RemoteProtocolError(
                f"part: offset {offset} out of order, expected {expected}",
                kind=KIND_PART,
                field="offset",
            )
        end = offset + n
        if end > size:
            raise RemoteProtocolError(
                f"part: {n} bytes at {offset} overrun the object's {size}",
                kind=KIND_PART,
                field="offset",
            )
        if end > len(self.data):
            raise MemoryError(
                f"part: the allocator gave {len(self.data)} bytes for an object of {size}"
            )
        return end

    def reserve(self, size: int, offset: int, n: int) -> memoryview:
        """The view of the buffer a part of ``n`` bytes at ``offset`` is to be received in.

        Raises as `add_part` would for the same part (nothing is reserved then).
        """
        end = self._check(size, offset, n, self.reserved)
        view = memoryview(self.data)[offset:end]
        self.reserved = end
        self._reserved.append(view)
        return view

    def add_part(self, size: int, offset: int, data: Bytes) -> bool:
        """Add one decoded part (as a `Part` event carries it); whether the object is whole.

        ``data`` is either the bytes (copied into the buffer) or the view `reserve` gave
        for this part, already filled.
        """
        reserved = self._reserved
        if reserved and data is reserved[0]:
            reserved.popleft()
            self.received = end = offset + len(data)
            return end == size
        end = self._check(size, offset, len(data), self.received)
        if reserved and end != offset:
            raise RemoteProtocolError(
                f"part: {len(data)} bytes at {offset} arrived while that part was being "
                "received in place",
                kind=KIND_PART,
                field="offset",
            )
        # Through a memoryview: bytearray slice assignment would copy ``data`` to a temporary.
        memoryview(self.data)[offset:end] = data
        self.received = end
        if not reserved:
            self.reserved = end
        return end == size

    @property
    def whole(self) -> bool:
        return self.size >= 0 and self.received == self.size

    def take(self) -> _Buffer:
        """The whole object; the `Parts` is empty afterwards."""
        data = self.data
        self.data = cast(_Buffer, bytearray())
        self.size, self.received, self.reserved = -1, 0, 0
        self._reserved.clear()
        return data
