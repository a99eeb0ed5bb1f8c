"""The codec: a payload to and from its event by the kinds table's dispatch dicts, and whole
frames to and from single events, for tests, tools and simple peers.

`encode_payload` and `decode_payload` are the connection's codec, one dict lookup each
(`_kinds.ENCODERS` by event class, `_kinds.DECODERS` by kind byte). `Connection` is the normal
way to speak the protocol; `encode_event` and `decode_event` are the same codec without the
connection rules, for one frame at a time.
"""

from __future__ import annotations

from typing import Final

from . import _kinds
from . import frame as F
from ._encode import Encoded
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import Event
from .frame import Bytes

__all__ = ["decode_event", "decode_payload", "encode_event", "encode_payload"]

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
