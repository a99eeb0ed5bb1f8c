"""The receive side of a connection: bytes in, whole frames out, decoded into events, by
either of two paths.

- The `receive_data` path: the bytes a connection was fed and has not parsed yet
  (`Incoming`), and the loop that turns whole frames into events (`decode_frames`, which
  the receive-into path decodes with too).
- The receive-into path (`ReceiveInto`): the reused buffer small frames land in, and large
  payloads landing where they will stay.
Theory of operation
-------------------
Memory: the receive side holds at most one incomplete frame, and every read is bounded
from the first byte. Once the 21 bytes of a frame's prefix and header are in, one lookup
checks the kind and the length together: each kind this sender may send now has a largest
body (a hello 42 bytes, a release 17, a part what this fetcher asked for, a task MAX_FRAME,
and only after hello), and a header over it is refused at once, naming the kind, the length
and the limit, before anything is sized from it. A large frame arriving in pieces is kept as
a list of the pieces and joined once when whole, so a 1-byte-at-a-time stream costs linear
time and, unless it lands in place (the receive-into path below), even an allowed 1 GiB
allocates nothing until its bytes arrive.

Whole frames are decoded from one `bytes` object: a payload under `BIG_PAYLOAD` is sliced
out as its own bytes, a larger one is a view of it (no copy).

where they will stay.

Receiving into place
--------------------
Instead of `receive_data`, a binding may let the connection say where bytes go, as
`asyncio.BufferedProtocol` does: `get_buffer` returns a writable view, the binding reads
into it and calls `buffer_updated` with the count. Small frames land in one reused buffer
(and leave it as bytes, so events own what they hold). A large frame's payload lands where
it will stay: for a part frame, the view a *part sink* gives for it (`land`: a fetcher
passes its `frame.Parts` buffer), for another frame of ``BIG_FRAME`` or more, a buffer from
the ``allocate`` given to `land`. The events are the ones `receive_data` gives for the same
bytes, however they are cut into reads; a part that landed carries the sink's view as its
``data``. Both paths ask the sink for every part frame with object bytes, in stream order,
so a sink can check the order of what it hands out; a part it declines (None) is received
as usual, and a sink may be asked again for a part it declined (`dista_proto._sinks`).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from . import frame as F
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import Event, Part
from ._sinks import Allocate, PartSink, landing, writable
from ._sizes import BIG_FRAME, BIG_PAYLOAD
from .frame import Bytes

if TYPE_CHECKING:
    # Only a type: the Protocol costs nothing at run time (`Connection` satisfies it).
    from ._receiver import Receiver

__all__ = [
    "FULL",
    "NOT_OFFERED",
    "PREFIX_HEADER",
    "READ_SIZE",
    "Incoming",
    "ReceiveInto",
    "decode_frames",
    "feed_into",
]

#: A frame's prefix and header: length, kind, object ID, task ID.
PREFIX_HEADER: Final = struct.Struct("<IBQQ")
FULL: Final = F.PREFIX + F.HEADER
_U32: Final = struct.Struct("<I")


class Incoming:
    """What `receive_data` buffered: unparsed whole bytes, a partial frame, or the pieces
    of a large frame."""

    def __init__(self) -> None:
        self._data: bytes | bytearray = b""
        self._pos = 0
        self._partial = bytearray()
        self._need = 0  # bytes _partial (or the pieces) must hold before parsing is worth it
        self._pieces: list[Bytes] | None = None
        self._pieces_size = 0

    def add(self, data: Bytes) -> None:
        """Buffer bytes read from the peer (never empty: `receive_data` checked)."""
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

    def parse(self, conn: Receiver, out: list[Event]) -> None:
        """Decode the whole frames buffered into ``out``; keep the bytes of an incomplete one."""
        if conn._error is not None:
            return
        data, pos = self._data, self._pos
        if isinstance(data, bytearray):
            # Only partial frames and double feeds land here: one copy, so events hold bytes.
            data, pos = bytes(memoryview(data)[pos:]), 0
        self._keep_rest(conn, data, decode_frames(conn, data, pos, out))

    def in_pieces(self) -> bool:
        """Whether a large frame is being collected in pieces."""
        return self._pieces is not None

    def _keep_rest(self, conn: Receiver, data: bytes, pos: int) -> None:
        """Move an incomplete frame's bytes into the partial buffer, or its pieces list."""
        self._data, self._pos = b"", 0
        if pos >= len(data):
            return
        rest = data[pos:]
        if len(rest) < F.PREFIX:
            self._partial = bytearray(rest)
            self._need = F.PREFIX
            return
        length = _U32.unpack_from(rest)[0]  # checked by decode_frames
        if len(rest) < FULL:
            # Parse again once the header is here: a forbidden kind is refused from it.
            self._partial = bytearray(rest)
            self._need = FULL
            return
        self._need = F.PREFIX + length
        if self._need >= BIG_FRAME:
            if not conn._partial(rest[4], length):
                return  # refused under the head's cap: nothing kept
            self._pieces = [rest]
            self._pieces_size = len(rest)
        else:
            self._partial = bytearray(rest)

    def in_frame(self) -> bool:
        """Whether a frame has begun and not ended (end of stream now cuts it short)."""
        return bool(self._partial) or self._pieces is not None or self._pos < len(self._data)

    def take(self) -> Bytes:
        """Every byte not parsed yet, leaving nothing (the receive-into path takes over)."""
        if self._pieces is not None:
            rest: Bytes = b"".join(self._pieces)
            self._pieces = None
        elif self._partial:
            rest, self._partial = bytes(self._partial), bytearray()
        else:
            rest = memoryview(self._data)[self._pos :]
        self._data, self._pos = b"", 0
        return rest


def decode_frames(conn: Receiver, data: bytes, pos: int, out: list[Event]) -> int:
    """Decode the whole frames in ``data`` from ``pos`` into ``out``; where they end.

    Each header is checked against what ``conn`` takes now, and a hello or welcome moves
    its state on the spot (the limits change for the frames after it). A protocol error
    fails the connection and consumes everything (returns the end).
    """
    n = len(data)
    unpack = PREFIX_HEADER.unpack_from
    decoders = conn._decoders
    limits = conn._limits
    from_head = conn._from_head
    try:
        while True:
            if n - pos < FULL:
                if n - pos >= F.PREFIX:
                    F.frame_length(data[pos : pos + 4])  # a bad length fails at once
                break
            length, kind, object_id, task_id = unpack(data, pos)
            if length > limits[kind] or length < F.HEADER:
                # At once, from the header: never buffer or size anything for a frame
                # we will refuse, nor for more than its kind can hold.
                conn._refuse(kind, length)
            end = pos + 4 + length
            if end > n:
                break
            if length - F.HEADER < BIG_PAYLOAD:
                payload: Bytes = data[pos + FULL : end]
            else:
                payload = memoryview(data)[pos + FULL : end]
            event = decoders[kind](object_id, task_id, payload, from_head)
            pos = end
            out.append(event)
            if kind == F.KIND_HELLO or kind == F.KIND_WELCOME:
                conn._handshake(event)
                limits = conn._limits
    except RemoteProtocolError as e:
        conn._fail(e)
        pos = n
    return pos


# -- the receive-into path ------------------------------------------------------------
#: The receive-into buffer small frames land in; `get_buffer` offers at least _MIN_FREE.
READ_SIZE: Final = 256 * 1024
_MIN_FREE: Final = 64 * 1024
#: The buffer a link starts with: a hello, a status request or a few small frames. A link
#: grows it to READ_SIZE once a read fills it (a busy peer), so ten thousand quiet links
#: cost 4 KiB each, not 256 KiB (measured: 10,000 observers held 2.6 GiB in a head).
_FIRST_SIZE: Final = 4096
#: A part with this many object bytes or more lands in its sink's view as it arrives.
_LAND_AT: Final = BIG_PAYLOAD
_PART_FULL: Final = FULL + F.PART_HEADER
_PART_FIELDS: Final = struct.Struct("<QQ")
# What the view `get_buffer` last offered is: nothing, the reused buffer, a landing, scrap.
_OFFERED_NONE: Final = 0
_OFFERED_RBUF: Final = 1
_OFFERED_DEST: Final = 2
_OFFERED_SCRAP: Final = 3
#: The kind in _dest_frame of a part landing in its sink's view (not a frame kind byte).
_LANDED_PART: Final = -1
NOT_OFFERED: Final = "buffer_updated without a buffer from get_buffer"


class ReceiveInto:
    """The buffers of the receive-into path: unparsed bytes are _rbuf[_rstart:_rend]; a
    large payload lands in _dest (_dest_pos bytes so far), the rest of its frame in
    _dest_frame. Made by a connection's first `get_buffer`."""

    def __init__(self) -> None:
        self._rbuf = bytearray(_FIRST_SIZE)
        self._rview = memoryview(self._rbuf)
        self._small = True  # still on _FIRST_SIZE: no read has filled what was offered
        self._rstart = self._rend = 0
        self._rneed = F.PREFIX  # bytes from _rstart before parsing is worth it
        self._offered = _OFFERED_NONE
        self._offered_size = 0
        self._dest: memoryview | None = None
        self._dest_pos = 0
        self._dest_frame = (0, 0, 0, 0, 0)  # kind, object ID, task ID, part size, offset

    def offer(self) -> memoryview:
        """The view for the next read: the rest of a landing payload, or free buffer."""
        dest = self._dest
        if dest is not None:
            view = dest[self._dest_pos :]
            self._offered, self._offered_size = _OFFERED_DEST, len(view)
            return view
        free = len(self._rbuf) - self._rend
        if free < _MIN_FREE and not (
            self._small and free and self._rneed <= len(self._rbuf) - self._rstart
        ):
            self._make_room()
        view = self._rview[self._rend :]
        self._offered, self._offered_size = _OFFERED_RBUF, len(view)
        return view

    def offer_scrap(self) -> memoryview:
        """A view to read what follows a broken stream into, and drop."""
        self._offered, self._offered_size = _OFFERED_SCRAP, len(self._rview)
        return self._rview

    def updated(self, conn: Receiver, nbytes: int) -> None:
        """``nbytes`` were read into the view last offered: parse or land them for ``conn``."""
        offered = self._offered
        if offered == _OFFERED_NONE:
            raise LocalProtocolError(NOT_OFFERED)
        if not 0 <= nbytes <= self._offered_size:
            raise LocalProtocolError(
                f"buffer_updated: {nbytes} bytes do not fit the {self._offered_size} offered"
            )
        self._offered = _OFFERED_NONE
        if offered == _OFFERED_RBUF:
            if nbytes == self._offered_size:
                self._small = False  # the peer sends more than fits: the next offer grows
            self._rend += nbytes
            if self._rend - self._rstart >= self._rneed:
                self._parse(conn)
        elif offered == _OFFERED_DEST:
            self._dest_pos += nbytes
            assert self._dest is not None
            if self._dest_pos == len(self._dest):
                self._landed(conn)

    def in_frame(self) -> bool:
        """Whether a frame has begun and not ended (end of stream now cuts it short)."""
        return self._rend > self._rstart or self._dest is not None

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
        self._small = False
        if new_size == size:
            if start:
                self._rview[:kept] = self._rview[start:end]
        else:
            rbuf = bytearray(new_size)
            rbuf[:kept] = self._rview[start:end]
            self._rbuf, self._rview = rbuf, memoryview(rbuf)
        self._rstart, self._rend = 0, kept

    def _parse(self, conn: Receiver) -> None:
        """Decode the whole frames in the reused buffer; see where the next one lands."""
        conn.forget_partial()  # a large frame growing this buffer is whole now
        start, end = self._rstart, self._rend
        data = bytes(self._rview[start:end])  # one copy: events own their bytes
        out: list[Event] = []
        pos = decode_frames(conn, data, 0, out)
        if out:
            conn._ready.extend(out)
        rest = len(data) - pos
        if conn._error is not None or rest == 0:
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
        if rest < FULL:
            self._rneed = FULL
            return
        # A frame whose header is here (its length and kind already checked by decode_frames).
        length, kind, object_id, task_id = PREFIX_HEADER.unpack_from(data, pos)
        sink = conn._sink
        if (
            kind == F.KIND_PART
            and sink is not None
            and length - F.HEADER - F.PART_HEADER >= _LAND_AT
        ):
            if rest < _PART_FULL:
                self._rneed = _PART_FULL
                return
            if self._land_part(sink, data, pos, length, object_id):
                return
        if F.PREFIX + length >= BIG_FRAME and not conn._partial(kind, length):
            self._rstart = self._rend = 0  # refused under the head's cap: nothing kept
            self._rneed = F.PREFIX
            return
        allocate = conn._allocate
        if (
            F.PREFIX + length >= BIG_FRAME
            and allocate is not None
            and self._land_frame(allocate, data, pos, length, kind, object_id, task_id)
        ):
            return
        self._rneed = F.PREFIX + length

    def _land_part(
        self, sink: PartSink, data: bytes, pos: int, length: int, object_id: int
    ) -> bool:
        size, offset = _PART_FIELDS.unpack_from(data, pos + FULL)
        n = length - F.HEADER - F.PART_HEADER
        if size > F.MAX_OBJECT or offset + n > size:
            return False  # the decoder refuses it once it is whole, as receive_data does
        view = landing(sink, object_id, size, offset, n)
        if view is None:
            return False
        self._start_dest(view, data, pos + _PART_FULL, (_LANDED_PART, object_id, 0, size, offset))
        return True

    def _land_frame(
        self,
        allocate: Allocate,
        data: bytes,
        pos: int,
        length: int,
        kind: int,
        object_id: int,
        task_id: int,
    ) -> bool:
        n = length - F.HEADER
        try:
            buffer = allocate(n)
        except MemoryError:
            return False
        view = writable(buffer, n)
        if view is None:
            return False
        self._start_dest(view[:n], data, pos + FULL, (kind, object_id, task_id, 0, 0))
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

    def _landed(self, conn: Receiver) -> None:
        """The payload landing in place is whole: its event."""
        view = self._dest
        assert view is not None
        self._dest = None
        conn.forget_partial()
        kind, object_id, task_id, size, offset = self._dest_frame
        if kind == _LANDED_PART:
            event: Event = Part(object_id, size, offset, view)
        else:
            try:
                event = conn._decoders[kind](object_id, task_id, view, conn._from_head)
            except RemoteProtocolError as e:
                conn._fail(e)
                return
            if kind == F.KIND_HELLO or kind == F.KIND_WELCOME:
                conn._handshake(event)
        conn._ready.append(event)


def feed_into(conn: Receiver, data: Bytes) -> None:
    """`receive_data` on the receive-into path: copy ``data`` where `get_buffer` says."""
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    while view:
        buffer = conn.get_buffer(len(view))
        n = min(len(buffer), len(view))
        buffer[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]
