"""Whole frames to and from single events, for tests, tools and simple peers.

`Connection` is the normal way to speak the protocol; these two functions are the same
codec without the connection rules, for one frame at a time.
"""

from __future__ import annotations

from . import frame as F
from ._decode import decode_payload
from ._encode import encode_payload
from ._errors import RemoteProtocolError
from ._events import Event
from .frame import Bytes

__all__ = ["decode_event", "encode_event"]


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
