"""The codec: a payload to and from its event by the kinds table's dispatch dicts; the send
side's frames as the buffers to write (`Outgoing`); and whole frames to and from single
events, for tests, tools and simple peers.

`encode_payload` and `decode_payload` are the connection's codec, one dict lookup each
(`_kinds.ENCODERS` by event class, `_kinds.DECODERS` by kind byte). `Connection` is the normal
way to speak the protocol; `encode_event` and `decode_event` are the same codec without the
connection rules, for one frame at a time.

`Connection.send` checks and encodes an event; `Outgoing` frames it. The send side copies
small payloads into one buffer (fewer writes) and passes large ones through as views (no
copy): a tail of `BIG_PAYLOAD` or more closes the shared buffer and is queued as a buffer
of its own, the caller's object itself (a view made flat by `frame.flat`), so it must not
change until it is written.
"""

from __future__ import annotations

import struct
from typing import Final

from . import _kinds
from . import frame as F
from ._encode import Encoded
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import Event
from ._sizes import BIG_PAYLOAD
from .frame import Bytes

__all__ = ["Outgoing", "decode_event", "decode_payload", "encode_event", "encode_payload"]

# Bound here rather than imported by name: CPython compiles a method call on a name that an
# import bound (it expects a module) as an attribute load, a new bound ``get`` every call:
# 25 ns of the 90 an encode_payload takes.
_ENCODERS: Final = _kinds.ENCODERS
_DECODERS: Final = _kinds.DECODERS


def encode_payload(event: object, from_head: bool) -> Encoded:
    """The kind, IDs and payload (prefix, tail) for ``event`` sent in this direction."""
    encoder = _ENCODERS.get(type(event))
    if encoder is None:
        raise LocalProtocolError(f"{event!r} is not a frame event")
    return encoder(event, from_head)


def decode_payload(
    kind: int, object_id: int, task_id: int, payload: Bytes, from_head: bool
) -> Event:
    """The event a frame carries; ``from_head`` says which way it travelled."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise RemoteProtocolError(f"unknown frame kind {kind}", kind=kind, field="kind")
    return decoder(object_id, task_id, payload, from_head)


def encode_event(event: Event, *, from_head: bool = False) -> bytes:
    """The whole frame (length prefix included) that carries ``event``."""
    kind, object_id, task_id, prefix, tail = encode_payload(event, from_head)
    out = bytearray()
    if tail is not None:
        tail = F.flat(tail)
    size = len(prefix) + (len(tail) if tail is not None else 0)
    F.append_header(out, kind, object_id, task_id, size)
    out += prefix
    if tail is not None:
        out += tail
    return bytes(out)


def decode_event(data: Bytes, *, from_head: bool = False) -> Event:
    """The event in one whole frame (length prefix included); no bytes may trail it."""
    length = F.frame_length(data)
    if len(data) != F.PREFIX + length:
        raise RemoteProtocolError(
            f"the prefix announces a {length}-byte body, {len(data) - F.PREFIX} bytes follow"
        )
    frame = F.parse_body(memoryview(data)[F.PREFIX :])
    payload = bytes(frame.payload)
    return decode_payload(frame.kind, frame.object_id, frame.task_id, payload, from_head)


# -- the send side -----------------------------------------------------------------------

_PREFIX_HEADER: Final = struct.Struct("<IBQQ")


class Outgoing:
    """Small frames gathered in one buffer, and the buffers already cut off before it."""

    def __init__(self) -> None:
        self._out = bytearray()
        self._buffers: list[Bytes] = []

    def queue(
        self, kind: int, object_id: int, task_id: int, prefix: bytes, tail: Bytes | None
    ) -> None:
        """Queue one encoded frame (`encode_payload`'s result); raise `LocalProtocolError`,
        queueing nothing, if its payload or IDs do not fit a frame."""
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

    def take(self) -> list[Bytes]:
        """Everything queued, in order, leaving nothing (`Connection.data_to_send`)."""
        buffers = self._buffers
        if self._out:
            buffers.append(bytes(self._out))
            self._out.clear()
        self._buffers = []
        return buffers
