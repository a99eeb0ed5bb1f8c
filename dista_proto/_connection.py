"""One end of a Dista connection: bytes in, events out; events in, buffers out.

Theory of operation
-------------------
A `Connection` never touches a socket. The binding feeds it what it reads
(`receive_data`, with ``b""`` for end of stream), drains events (`next_event` or the batched
`next_events`), hands it events to send (`send`) and writes what `data_to_send` returns.

Each side of the connection has a state (`ConnectionState`; where they start and what
moves them is `dista_proto._state`). The head's side of a link starts in AWAIT_HELLO in both
directions: the peer's first frame must be hello, and the head may send nothing until it has
one. A peer's side starts with our direction in AWAIT_HELLO (we must send hello first) and,
for drivers and clients, theirs in AWAIT_WELCOME (the head answers with welcome, or an error
frame refusing us). Object-server links carry no hello and start OPEN. In OPEN, every kind
is checked against the protocol page's "sent by" column (`dista_proto._roles`), both when we
send (`LocalProtocolError`, nothing queued) and when we receive (`RemoteProtocolError`).

A receive error moves their side to ERROR and is raised from every later `next_event`; the
head queues an error frame saying what was wrong before raising, so a peer learns why it is
dropped. End of stream between frames is a clean close (`ConnectionClosed`); in the middle
of a frame it is an error.

Memory: the receive side holds at most one incomplete frame, and every read is bounded
from the first byte. Once the 21 bytes of a frame's prefix and header are in, one lookup
checks the kind and the length together: each kind this sender may send now has a largest
body (a hello 42 bytes, a release 17, a part what this fetcher asked for, a task MAX_FRAME,
and only after hello), and a header over it is refused at once, naming the kind, the length
and the limit, before anything is sized from it. A large frame arriving in pieces is kept as
a list of the pieces and joined once when whole, so a 1-byte-at-a-time stream costs linear
time and, unless it lands in place (below), even an allowed 1 GiB allocates nothing until
its bytes arrive. The send side copies small payloads into one buffer (fewer writes) and passes
large ones through as views (no copy).

Receiving into place
--------------------
Instead of `receive_data`, a binding may let the connection say where bytes go, as
`asyncio.BufferedProtocol` does: `get_buffer` returns a writable view, the binding reads
into it and calls `buffer_updated` with the count. Small frames land in one reused buffer
(and leave it as bytes, so events own what they hold). A large frame's payload lands where
it will stay: for a part frame, the view a *part sink* gives for it (`land`: a fetcher
passes its `frame.Parts` buffer), for another frame of ``_BIG_FRAME`` or more, a buffer from
the ``allocate`` given to `land`. The events are the ones `receive_data` gives for the same
bytes, however they are cut into reads; a part that landed carries the sink's view as its
``data``. Both paths ask the sink for every part frame with object bytes, in stream order,
so a sink can check the order of what it hands out; a part it declines (None) is received
as usual, and a sink may be asked again for a part it declined.
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from collections.abc import Callable
from typing import Final

from . import frame as F
from ._decode import DECODERS
from ._encode import encode_payload
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import ConnectionClosed, Error, Event, Fetch, Hello, Part
from ._roles import Role, part_limit
from ._state import (
    ConnectionState,
    after_hello,
    after_welcome,
    receive_refusal,
    send_refusal,
    sent_hello,
    sent_welcome,
    start,
)
from .frame import Bytes

__all__ = [
    "NEED_DATA",
    "READ_SIZE",
    "Allocate",
    "Connection",
    "ConnectionState",
    "NeedData",
    "PartSink",
]

#: Where a part frame's object bytes land: ``(object ID, object size, offset, n)`` -> a
#: writable view of exactly ``n`` bytes, or None to receive the part as usual.
PartSink = Callable[[int, int, int, int], memoryview | None]
#: A writable buffer of at least ``n`` bytes for a large frame's payload to land in.
Allocate = Callable[[int], bytearray | memoryview]


class NeedData(enum.Enum):
    """`next_event` has no whole frame yet: feed more bytes."""

    NEED_DATA = enum.auto()


NEED_DATA: Final = NeedData.NEED_DATA


_PREFIX_HEADER: Final = struct.Struct("<IBQQ")
#: Kinds whose sending changes the connection's state (see `Connection._sent`).
_SENT_CHANGES_STATE: Final = frozenset({F.KIND_HELLO, F.KIND_WELCOME, F.KIND_FETCH})
_U32: Final = struct.Struct("<I")
_FULL: Final = F.PREFIX + F.HEADER
#: Payloads at least this large are passed as views (received) or separate buffers (sent).
BIG_PAYLOAD: Final = 64 * 1024
#: A frame at least this large that arrives in pieces is collected as a list of pieces.
_BIG_FRAME: Final = 1 << 20
#: The receive-into buffer small frames land in; `get_buffer` offers at least _MIN_FREE.
READ_SIZE: Final = 256 * 1024
_MIN_FREE: Final = 64 * 1024
#: A part with this many object bytes or more lands in its sink's view as it arrives.
_LAND_AT: Final = BIG_PAYLOAD
_PART_FULL: Final = _FULL + F.PART_HEADER
_PART_FIELDS: Final = struct.Struct("<QQ")
# What the view `get_buffer` last offered is: nothing, the reused buffer, a landing, scrap.
_OFFERED_NONE: Final = 0
_OFFERED_RBUF: Final = 1
_OFFERED_DEST: Final = 2
_OFFERED_SCRAP: Final = 3
_d_part: Final = DECODERS[F.KIND_PART]
#: The kind in _dest_frame of a part landing in its sink's view (not a frame kind byte).
_LANDED_PART: Final = -1


class Connection:
    """The sans-IO state of one connection, for ``our_role``."""

    def __init__(self, our_role: Role) -> None:
        self.our_role: Final = our_role
        # What they may send is the largest body each kind byte may announce now (0: the
        # kind may not come), so a header is checked, kind and length, with one lookup, and
        # nothing is sized from a length before it passed (`dista_proto._state`).
        self.their_role: Role | None
        self.their_role, self.our_state, self.their_state, self._limits, self._allowed_out = start(
            our_role
        )
        self._from_head = self.their_role == Role.HEAD
        self._part_asked = 0  # the largest part a fetcher asked for (0: none yet)
        # Receiving: unparsed whole bytes, a partial frame, or the pieces of a large frame.
        self._data: bytes | bytearray = b""
        self._pos = 0
        self._partial = bytearray()
        self._need = 0  # bytes _partial must hold before it is worth parsing
        self._pieces: list[Bytes] | None = None
        self._pieces_size = 0
        self._eof = False
        self._ready: deque[Event] = deque()
        self._error: RemoteProtocolError | None = None
        self._decoders = DECODERS
        self._sink: PartSink | None = None
        self._allocate: Allocate | None = None
        # Receiving into place: unparsed bytes are _rbuf[_rstart:_rend]; a large payload
        # lands in _dest (_dest_pos bytes so far), the rest of its frame in _dest_frame.
        self._into = False
        self._rbuf = bytearray()
        self._rview = memoryview(self._rbuf)
        self._rstart = self._rend = 0
        self._rneed = F.PREFIX  # bytes from _rstart before parsing is worth it
        self._offered = _OFFERED_NONE
        self._offered_size = 0
        self._dest: memoryview | None = None
        self._dest_pos = 0
        self._dest_frame = (0, 0, 0, 0, 0)  # kind, object ID, task ID, part size, offset
        # Sending: small frames gather in _out; large payloads become their own buffers.
        self._out = bytearray()
        self._buffers: list[Bytes] = []

    # -- receiving ----------------------------------------------------------------------------

    def land(self, parts: PartSink | None = None, allocate: Allocate | None = None) -> None:
        """Say where large payloads land: part frames' object bytes in the view ``parts``
        gives for each (both receive paths), other frames of 1 MiB or more, received with
        `get_buffer`, in a buffer from ``allocate``. None for either: as usual.

        A view of the wrong size or a read-only one is ignored (the part is received as
        usual); `allocate` raising MemoryError leaves the frame to the usual path too.
        """
        self._sink = parts
        self._allocate = allocate
        if parts is None:
            self._decoders = DECODERS
        else:
            decoders = dict(DECODERS)
            decoders[F.KIND_PART] = self._decode_part
            self._decoders = decoders

    def receive_data(self, data: Bytes) -> None:
        """Buffer bytes read from the peer; ``b""`` means the peer closed its side."""
        if self._eof:
            raise LocalProtocolError("received data after the end of the stream")
        if not data:
            self._eof = True
            return
        if self._into:
            self._feed_into(data)
            return
        if self._error is not None:
            return  # the stream is already broken: don't buffer what follows
        if not isinstance(data, bytes):
            # The caller may reuse its buffer, and a memoryview may not be of bytes: own a copy.
            data = bytes(data)
        if self._pieces is not None:
            self._pieces.append(data)
            self._pieces_size += len(data)
            if self._pieces_size >= self._need:
                self._data = b"".join(self._pieces)
                self._pos = 0
                self._pieces = None
            return
        if self._partial:
            self._partial += data
            if len(self._partial) >= self._need:
                self._data, self._partial = self._partial, bytearray()
                self._pos = 0
            return
        if self._pos < len(self._data):
            # Fed twice without parsing in between: grow one buffer (linear, not quadratic).
            if not isinstance(self._data, bytearray) or self._pos:
                self._data = bytearray(memoryview(self._data)[self._pos :])
                self._pos = 0
            self._data += data
            return
        self._data = data
        self._pos = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A writable view for the next bytes read from the peer (the receive-into path).

        Read at most ``len(view)`` bytes into it, then call `buffer_updated` with how many,
        before asking for another buffer. ``sizehint`` is ignored (as asyncio allows): the
        view is the free part of the reused buffer, or the rest of a payload landing in
        place, which is never more than the frame's own bytes.
        """
        if self._eof:
            raise LocalProtocolError("received data after the end of the stream")
        if not self._into:
            self._start_into()
        if self._error is not None:
            # The stream is broken: take what follows somewhere, and drop it.
            self._offered, self._offered_size = _OFFERED_SCRAP, len(self._rview)
            return self._rview
        dest = self._dest
        if dest is not None:
            view = dest[self._dest_pos :]
            self._offered, self._offered_size = _OFFERED_DEST, len(view)
            return view
        if len(self._rbuf) - self._rend < _MIN_FREE:
            self._make_room()
        view = self._rview[self._rend :]
        self._offered, self._offered_size = _OFFERED_RBUF, len(view)
        return view

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view `get_buffer` returned: take them."""
        offered = self._offered
        if offered == _OFFERED_NONE:
            raise LocalProtocolError("buffer_updated without a buffer from get_buffer")
        if not 0 <= nbytes <= self._offered_size:
            raise LocalProtocolError(
                f"buffer_updated: {nbytes} bytes do not fit the {self._offered_size} offered"
            )
        self._offered = _OFFERED_NONE
        if offered == _OFFERED_RBUF:
            self._rend += nbytes
            if self._rend - self._rstart >= self._rneed:
                self._parse_rbuf()
        elif offered == _OFFERED_DEST:
            self._dest_pos += nbytes
            assert self._dest is not None
            if self._dest_pos == len(self._dest):
                self._landed()

    def next_event(self) -> Event | ConnectionClosed | NeedData:
        """The next event, `NEED_DATA`, or `ConnectionClosed` once the peer has closed."""
        if not self._ready:
            self._parse()
            if not self._ready:
                return self._idle()
        return self._ready.popleft()

    def next_events(self) -> list[Event]:
        """Every event that whole frames carry right now (maybe none): the fast path.

        After the last event, `next_event` says whether more data is needed or the peer
        closed; a protocol error after some good frames is raised by the next call.
        """
        if self._ready:
            events = list(self._ready)
            self._ready.clear()
            return events
        if self._error is not None:
            raise self._error
        if self._into:
            return []  # parsed as the bytes arrived
        out: list[Event] = []
        self._parse_into(out)
        error = self._failure()  # parsing may have failed: not the `_error` checked above
        if not out and error is not None:
            raise error
        return out

    def _failure(self) -> RemoteProtocolError | None:
        return self._error

    def _idle(self) -> ConnectionClosed | NeedData:
        if self._error is not None:
            raise self._error
        if not self._eof:
            return NEED_DATA
        if (
            self._partial
            or self._pieces is not None
            or self._pos < len(self._data)
            or self._rend > self._rstart
            or self._dest is not None
        ):
            error = RemoteProtocolError("the peer closed the stream in the middle of a frame")
            self._fail(error)
            raise error
        self.their_state = ConnectionState.CLOSED
        return ConnectionClosed()

    def _parse(self) -> None:
        out: list[Event] = []
        self._parse_into(out)
        self._ready.extend(out)

    def _parse_into(self, out: list[Event]) -> None:
        if self._error is not None:
            return
        data, pos = self._data, self._pos
        if isinstance(data, bytearray):
            # Only partial frames and double feeds land here: one copy, so events hold bytes.
            data, pos = bytes(memoryview(data)[pos:]), 0
        self._keep_rest(data, self._frames(data, pos, out))

    def _frames(self, data: bytes, pos: int, out: list[Event]) -> int:
        """Decode the whole frames in ``data`` from ``pos`` into ``out``; where they end.

        A protocol error fails the connection and consumes everything (returns the end).
        """
        n = len(data)
        unpack = _PREFIX_HEADER.unpack_from
        decoders = self._decoders
        limits = self._limits
        from_head = self._from_head
        try:
            while True:
                if n - pos < _FULL:
                    if n - pos >= F.PREFIX:
                        F.frame_length(data[pos : pos + 4])  # a bad length fails at once
                    break
                length, kind, object_id, task_id = unpack(data, pos)
                if length > limits[kind] or length < F.HEADER:
                    # At once, from the header: never buffer or size anything for a frame
                    # we will refuse, nor for more than its kind can hold.
                    self._refuse(kind, length)
                end = pos + 4 + length
                if end > n:
                    break
                if length - F.HEADER < BIG_PAYLOAD:
                    payload: Bytes = data[pos + _FULL : end]
                else:
                    payload = memoryview(data)[pos + _FULL : end]
                event = decoders[kind](object_id, task_id, payload, from_head)
                pos = end
                out.append(event)
                if kind == F.KIND_HELLO or kind == F.KIND_WELCOME:
                    self._handshake(event)
                    limits = self._limits
        except RemoteProtocolError as e:
            self._fail(e)
            pos = n
        return pos

    def _keep_rest(self, data: bytes, pos: int) -> None:
        """Move an incomplete frame's bytes into the partial buffer, or its pieces list."""
        self._data, self._pos = b"", 0
        if pos >= len(data):
            return
        rest = data[pos:]
        if len(rest) < F.PREFIX:
            self._partial = bytearray(rest)
            self._need = F.PREFIX
            return
        length = _U32.unpack_from(rest)[0]  # checked by _parse_into
        if len(rest) < _FULL:
            # Parse again once the header is here: a forbidden kind is refused from it.
            self._partial = bytearray(rest)
            self._need = _FULL
            return
        self._need = F.PREFIX + length
        if self._need >= _BIG_FRAME:
            self._pieces = [rest]
            self._pieces_size = len(rest)
        else:
            self._partial = bytearray(rest)

    # -- receiving into place -----------------------------------------------------------------

    def _start_into(self) -> None:
        """Switch to the receive-into path, taking over what `receive_data` left unparsed."""
        self._into = True
        self._rbuf = bytearray(READ_SIZE)
        self._rview = memoryview(self._rbuf)
        if self._pieces is not None:
            rest: Bytes = b"".join(self._pieces)
            self._pieces = None
        elif self._partial:
            rest, self._partial = bytes(self._partial), bytearray()
        else:
            rest = memoryview(self._data)[self._pos :]
        self._data, self._pos = b"", 0
        if rest and self._error is None:
            self._feed_into(rest)

    def _feed_into(self, data: Bytes) -> None:
        """`receive_data` on the receive-into path: copy ``data`` where `get_buffer` says."""
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
        while view:
            buffer = self.get_buffer(len(view))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]

    def _make_room(self) -> None:
        """Give the reused buffer at least _MIN_FREE free bytes (or the frame's rest)."""
        start, end = self._rstart, self._rend
        kept = end - start
        size = len(self._rbuf)
        frame = self._rneed
        if max(frame, kept + _MIN_FREE) <= READ_SIZE:
            new_size = READ_SIZE
        elif frame <= size:
            new_size = size  # the frame in progress fits once the buffer is compacted
        else:
            # A frame larger than the buffer, taken as it comes, grows it toward the frame's
            # size by doubling: the copies stay linear, nothing is allocated ahead of bytes.
            new_size = max(min(frame, 2 * size), kept + _MIN_FREE)
        if new_size == size:
            if start:
                self._rview[:kept] = self._rview[start:end]
        else:
            rbuf = bytearray(new_size)
            rbuf[:kept] = self._rview[start:end]
            self._rbuf, self._rview = rbuf, memoryview(rbuf)
        self._rstart, self._rend = 0, kept

    def _parse_rbuf(self) -> None:
        """Decode the whole frames in the reused buffer; see where the next one lands."""
        start, end = self._rstart, self._rend
        data = bytes(self._rview[start:end])  # one copy: events own their bytes
        out: list[Event] = []
        pos = self._frames(data, 0, out)
        if out:
            self._ready.extend(out)
        rest = len(data) - pos
        if self._error is not None or rest == 0:
            self._rstart = self._rend = 0
            self._rneed = F.PREFIX
            if len(self._rbuf) > READ_SIZE:
                self._rbuf = bytearray(READ_SIZE)
                self._rview = memoryview(self._rbuf)
            return
        self._rstart = start + pos
        if rest < F.PREFIX:
            self._rneed = F.PREFIX
            return
        if rest < _FULL:
            self._rneed = _FULL
            return
        # A frame whose header is here (its length and kind already checked by _frames).
        length, kind, object_id, task_id = _PREFIX_HEADER.unpack_from(data, pos)
        if (
            kind == F.KIND_PART
            and self._sink is not None
            and length - F.HEADER - F.PART_HEADER >= _LAND_AT
        ):
            if rest < _PART_FULL:
                self._rneed = _PART_FULL
                return
            if self._land_part(data, pos, length, object_id):
                return
        if (
            F.PREFIX + length >= _BIG_FRAME
            and self._allocate is not None
            and self._land_frame(data, pos, length, kind, object_id, task_id)
        ):
            return
        self._rneed = F.PREFIX + length

    def _land_part(self, data: bytes, pos: int, length: int, object_id: int) -> bool:
        size, offset = _PART_FIELDS.unpack_from(data, pos + _FULL)
        n = length - F.HEADER - F.PART_HEADER
        if size > F.MAX_OBJECT or offset + n > size:
            return False  # the decoder refuses it once it is whole, as receive_data does
        view = self._landing(object_id, size, offset, n)
        if view is None:
            return False
        self._start_dest(view, data, pos + _PART_FULL, (_LANDED_PART, object_id, 0, size, offset))
        return True

    def _land_frame(
        self, data: bytes, pos: int, length: int, kind: int, object_id: int, task_id: int
    ) -> bool:
        n = length - F.HEADER
        assert self._allocate is not None
        try:
            buffer = self._allocate(n)
        except MemoryError:
            return False
        view = _writable(buffer, n)
        if view is None:
            return False
        self._start_dest(view[:n], data, pos + _FULL, (kind, object_id, task_id, 0, 0))
        return True

    def _start_dest(
        self, view: memoryview, data: bytes, start: int, frame: tuple[int, int, int, int, int]
    ) -> None:
        """Land the rest of a frame in ``view``: what is here now, then `get_buffer`'s reads."""
        have = len(data) - start
        view[:have] = memoryview(data)[start:]
        self._dest, self._dest_pos, self._dest_frame = view, have, frame
        self._rstart = self._rend = 0
        self._rneed = F.PREFIX

    def _landed(self) -> None:
        """The payload landing in place is whole: its event."""
        view = self._dest
        assert view is not None
        self._dest = None
        kind, object_id, task_id, size, offset = self._dest_frame
        if kind == _LANDED_PART:
            event: Event = Part(object_id, size, offset, view)
        else:
            try:
                event = self._decoders[kind](object_id, task_id, view, self._from_head)
            except RemoteProtocolError as e:
                self._fail(e)
                return
            if kind == F.KIND_HELLO or kind == F.KIND_WELCOME:
                self._handshake(event)
        self._ready.append(event)

    def _decode_part(self, object_id: int, task_id: int, payload: Bytes, from_head: bool) -> Event:
        """The part decoder when a sink is set: a whole part's bytes are copied to its view."""
        event = _d_part(object_id, task_id, payload, from_head)
        assert isinstance(event, Part)
        n = len(event.data)
        if n:
            view = self._landing(object_id, event.size, event.offset, n)
            if view is not None:
                view[:] = event.data
                return Part(object_id, event.size, event.offset, view)
        return event

    def _landing(self, object_id: int, size: int, offset: int, n: int) -> memoryview | None:
        assert self._sink is not None
        view = self._sink(object_id, size, offset, n)
        if view is None:
            return None
        view = _writable(view, n)
        return view if view is not None and len(view) == n else None

    def _refuse(self, kind: int, length: int) -> None:
        """Raise the error a header announcing ``length`` bytes of ``kind`` deserves."""
        raise receive_refusal(
            kind,
            length,
            self._limits[kind],
            self._part_asked,
            self.their_state,
            self.their_role,
            self.our_role,
        )

    def _handshake(self, event: Event) -> None:
        self.their_state = ConnectionState.OPEN
        if isinstance(event, Hello):
            role = Role(event.role)
            self.their_role = role
            self.our_state, self._allowed_out, self._limits = after_hello(role)
        else:  # welcome
            self._limits = after_welcome(self.our_role)

    def _fail(self, error: RemoteProtocolError) -> None:
        self._error = error
        self.their_state = ConnectionState.ERROR
        if self.our_role == Role.HEAD and self.our_state != ConnectionState.ERROR:
            # Tell the peer why it is dropped: the one frame the head sends to anyone.
            self._queue(*encode_payload(Error(0, f"protocol error: {error}"), True))
            self.our_state = ConnectionState.CLOSED
            self._allowed_out = frozenset()

    # -- sending ------------------------------------------------------------------------------

    def send(self, event: Event) -> None:
        """Queue ``event``; raise `LocalProtocolError`, queueing nothing, if it can't go."""
        kind = event.kind
        if kind not in self._allowed_out:
            self._refuse_send(event)
        encoded = encode_payload(event, self.our_role == Role.HEAD)
        if isinstance(event, Hello) and event.role != self.our_role:
            raise LocalProtocolError(
                f"hello: role {event.role} on a {self.our_role.name.lower()}'s connection",
                kind=kind,
                field="role",
            )
        self._queue(*encoded)
        if kind in _SENT_CHANGES_STATE:  # one lookup on the common path
            self._sent(event)

    def _sent(self, event: Event) -> None:
        """What sending a hello, a welcome or a fetch changes."""
        if isinstance(event, Hello):
            self.our_state = ConnectionState.OPEN
            self._allowed_out = sent_hello(self.our_role)
        elif isinstance(event, Fetch):
            # A fetcher's part frames carry at most the largest part it asked for; an empty
            # fetch (part 0) asks for a result frame instead.
            if event.part > self._part_asked:
                self._part_asked = event.part
                self._limits[F.KIND_PART] = part_limit(event.part)
        else:  # welcome
            self.our_state = ConnectionState.OPEN
            assert self.their_role is not None
            self._allowed_out = sent_welcome(self.their_role)

    def _refuse_send(self, event: Event) -> None:
        raise send_refusal(event.kind, self.our_state, self.our_role, self.their_role)

    def _queue(
        self, kind: int, object_id: int, task_id: int, prefix: bytes, tail: Bytes | None
    ) -> None:
        if tail is not None and isinstance(tail, memoryview):
            tail = F.flat(tail)
        size = len(prefix) + (len(tail) if tail is not None else 0)
        if size > F.MAX_PAYLOAD:
            raise LocalProtocolError(
                f"{F.kind_name(kind)}: a payload of {size} bytes is over MAX_PAYLOAD "
                f"({F.MAX_PAYLOAD}); send large objects in part frames",
                kind=kind,
                field="payload",
            )
        try:
            header = _PREFIX_HEADER.pack(F.HEADER + size, kind, object_id, task_id)
        except struct.error:
            F.append_header(bytearray(), kind, object_id, task_id, size)  # raises, naming it
            raise  # pragma: no cover
        out = self._out
        out += header
        out += prefix
        if tail is not None:
            if len(tail) < BIG_PAYLOAD:
                out += tail
            else:
                self._buffers.append(bytes(out))
                out.clear()
                self._buffers.append(tail)

    def data_to_send(self) -> list[Bytes]:
        """The buffers to write, in order; large payloads are views of the caller's bytes."""
        buffers = self._buffers
        if self._out:
            buffers.append(bytes(self._out))
            self._out.clear()
        self._buffers = []
        return buffers

    def send_failed(self) -> None:
        """The binding could not write: nothing more can be sent."""
        self.our_state = ConnectionState.ERROR
        self._allowed_out = frozenset()

    def close(self) -> None:
        """We are done sending: later sends raise `LocalProtocolError`."""
        if self.our_state != ConnectionState.ERROR:
            self.our_state = ConnectionState.CLOSED
        self._allowed_out = frozenset()


def _writable(buffer: bytearray | memoryview, n: int) -> memoryview | None:
    """``buffer`` as a flat writable byte view of at least ``n`` bytes, or None.

    A view that already is one is returned itself (a fetcher knows its parts by identity).
    """
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.readonly or not view.c_contiguous or view.nbytes < n:
        return None
    if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
        view = view.cast("B")
    return view
