"""Where large received payloads land instead of in a connection's own buffers: the part
sink and the allocator a connection is given with `Connection.land`.

A sink is asked for every part frame with object bytes, on both receive paths: the
receive-into path lands a large part in the sink's view as its bytes arrive
(`dista_proto._incoming`), the `receive_data` path copies a whole part into it through
the part decoder `sink_decoders` makes. A view is only used if it is writable, flat and of
exactly the part's size; anything else, or None, leaves the part to be received as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from . import frame as F
from ._decode import Decoder
from ._events import Event, Part
from ._kinds import DECODERS
from .frame import Bytes

__all__ = ["Allocate", "PartSink", "landing", "sink_decoders", "writable"]

#: Where a part frame's object bytes land: ``(object ID, object size, offset, n)`` -> a
#: writable view of exactly ``n`` bytes, or None to receive the part as usual.
PartSink = Callable[[int, int, int, int], memoryview | None]
#: A writable buffer of at least ``n`` bytes for a large frame's payload to land in.
Allocate = Callable[[int], bytearray | memoryview]

_d_part: Final = DECODERS[F.KIND_PART]


def sink_decoders(sink: PartSink) -> dict[int, Decoder]:
    """The decoders for a connection whose part frames land in ``sink``: on the
    `receive_data` path, a whole part's object bytes are copied to the sink's view."""

    def decode_part(object_id: int, task_id: int, payload: Bytes, from_head: bool) -> Event:
        event = _d_part(object_id, task_id, payload, from_head)
        assert isinstance(event, Part)
        n = len(event.data)
        if n:
            view = landing(sink, object_id, event.size, event.offset, n)
            if view is not None:
                view[:] = event.data
                return Part(object_id, event.size, event.offset, view)
        return event

    decoders = dict(DECODERS)
    decoders[F.KIND_PART] = decode_part
    return decoders


def landing(sink: PartSink, object_id: int, size: int, offset: int, n: int) -> memoryview | None:
    """The sink's view for a part's ``n`` object bytes, if it gives a usable one."""
    view = sink(object_id, size, offset, n)
    if view is None:
        return None
    view = writable(view, n)
    return view if view is not None and len(view) == n else None


def writable(buffer: bytearray | memoryview, n: int) -> memoryview | None:
    """``buffer`` as a flat writable byte view of at least ``n`` bytes, or None.

    A view that already is one is returned itself (a fetcher knows its parts by identity).
    """
    view = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    if view.readonly or not view.c_contiguous or view.nbytes < n:
        return None
    if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
        view = view.cast("B")
    return view
