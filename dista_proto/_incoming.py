"""The `receive_data` path: the bytes a connection was fed and has not parsed yet, and the
loop that turns whole frames into events (the receive-into path decodes with it too).

Theory of operation
-------------------
Memory: the receive side holds at most one incomplete frame, and every read is bounded
from the first byte. Once the 21 bytes of a frame's prefix and header are in, one lookup
checks the kind and the length together: each kind this sender may send now has a largest
body (a hello 42 bytes, a release 17, a part what this fetcher asked for, a task MAX_FRAME,
and only after hello), and a header over it is refused at once, naming the kind, the length
and the limit, before anything is sized from it. A large frame arriving in pieces is kept as
a list of the pieces and joined once when whole, so a 1-byte-at-a-time stream costs linear
time and, unless it lands in place (`dista_proto._receive_into`), even an allowed 1 GiB
allocates nothing until its bytes arrive.

Whole frames are decoded from one `bytes` object: a payload under `BIG_PAYLOAD` is sliced
out as its own bytes, a larger one is a view of it (no copy).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final

from . import frame as F
from ._errors import RemoteProtocolError
from ._events import Event
from ._sizes import BIG_FRAME, BIG_PAYLOAD
from .frame import Bytes

if TYPE_CHECKING:
    # Only a type: the Protocol costs nothing at run time (`Connection` satisfies it).
    from ._receiver import Receiver

__all__ = ["FULL", "PREFIX_HEADER", "Incoming", "decode_frames"]

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
        self._keep_rest(data, decode_frames(conn, data, pos, out))

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
        length = _U32.unpack_from(rest)[0]  # checked by decode_frames
        if len(rest) < FULL:
            # Parse again once the header is here: a forbidden kind is refused from it.
            self._partial = bytearray(rest)
            self._need = FULL
            return
        self._need = F.PREFIX + length
        if self._need >= BIG_FRAME:
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
