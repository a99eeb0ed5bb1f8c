"""The send side of a connection: the frames `send` queued, as the buffers to write.

`Connection.send` checks and encodes an event; `Outgoing` frames it. The send side copies
small payloads into one buffer (fewer writes) and passes large ones through as views (no
copy): a tail of `BIG_PAYLOAD` or more closes the shared buffer and is queued as a buffer
of its own, the caller's object itself (a view made flat by `frame.flat`), so it must not
change until it is written.
"""

from __future__ import annotations

import struct
from typing import Final

from . import frame as F
from ._errors import LocalProtocolError
from ._sizes import BIG_PAYLOAD
from .frame import Bytes

__all__ = ["Outgoing"]

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
