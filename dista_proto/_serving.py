"""An object server's answer to one fetch it admitted: the frames that carry the object
back, or the error frame that says why not.

By the page: one result frame when the fetcher asked for the whole object (an empty fetch)
or it fits one part, else part frames of the size asked for (never smaller than the
server's ``min_part``: a fetcher asking for tiny parts would make it write a frame header
per few bytes). By our extension, to a fetcher that named a mailbox on this host, one
mapped frame, when the runtime could send the object there as a memory file
(`dista_proto._mapping`).
"""

from __future__ import annotations

from collections.abc import Iterator

from . import frame as F
from ._events import Address, Error, Event, Fetch, Mapped, Part, Result
from ._mapping import Mapping
from .frame import Bytes

__all__ = ["answer_fetch"]


def answer_fetch(
    fetch: Fetch, value: Bytes | None, where: Address, min_part: int, mapping: Mapping | None
) -> Iterator[Event]:
    """The frames answering ``fetch`` for ``value`` (None: not stored at ``where``)."""
    oid = fetch.object_id
    if value is None:
        yield Error(oid, f"object {oid:#x} is not on this worker ({where})")
        return
    size = len(value)
    if fetch.mailbox and mapping is not None and size:
        ticket = mapping.share(oid, value, fetch.mailbox)
        if ticket is not None:
            yield Mapped(oid, size, ticket)
            return
    part = fetch.part
    if part == 0 or (size <= part and size <= F.MAX_PAYLOAD):
        if size > F.MAX_PAYLOAD:
            why = f"object {oid:#x} is {size} bytes, too large for one frame: fetch in parts"
            yield Error(oid, why)
        else:
            yield Result(oid, value)
        return
    if part < min_part:
        yield Error(
            oid, f"object {oid:#x}: a fetch for parts of {part} bytes; ask for at least {min_part}"
        )
        return
    step = F.part_payload_size(part)
    view = memoryview(value).cast("B")
    for offset in range(0, size, step):
        yield Part(oid, size, offset, view[offset : offset + step])
