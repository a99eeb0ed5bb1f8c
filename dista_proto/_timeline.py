"""The head's timeline of finished tasks, packed: what `dista timeline` reads.

A `TimelineRecord` as a named tuple of Python ints costs about 500 bytes (nanosecond stamps
are large ints of their own), so the head's 100,000 records took about 50 MiB, kept after
every driver left (and a fuzzer's hostile drivers left the head 1.9x its idle size that
way). Each record is kept here as one 84-byte string instead (its owner's link, the
object and task IDs, the seven stamps, and an index into a table of worker addresses),
about 120 bytes in all: a quarter. Records are unpacked only when asked for.

The head's four stamps come in on its monotonic clock (its ``now``) and are kept as wall-clock
nanoseconds: ``wall_offset_ns`` (wall minus monotonic, read once by the runtime) is added
here, once. The worker's three came converted by the worker (`Worker`'s spans).
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Final

from ._core import to_wall
from ._events import Address, TimelineRecord

__all__ = ["TimelineLog"]

#: owner link, object ID, task ID, submitted, queued, dispatched, settled, arrived,
#: started, ended, the worker address's index.
_RECORD: Final = struct.Struct("<qQQqqqqqqqI")
_OWNER: Final = struct.Struct("<q")


class TimelineLog:
    """At most ``cap`` records, the oldest dropped first, each with the link of its
    driver (the owner); the head's stamps moved to the wall clock by ``wall_offset_ns``."""

    __slots__ = ("_addresses", "_index", "_offset", "_records")

    def __init__(self, cap: int, wall_offset_ns: int = 0) -> None:
        self._records: deque[bytes] = deque(maxlen=cap)
        self._addresses: list[Address] = []
        self._index: dict[Address, int] = {}
        self._offset = wall_offset_ns

    def __len__(self) -> int:
        return len(self._records)

    def add(self, owner: int, stamps: tuple[int, ...], address: Address) -> None:
        """A finished task of ``owner``'s: ``stamps`` are a `TimelineRecord`'s nine
        integers in its order (object ID, task ID, the four head stamps on the monotonic
        clock, the three worker stamps on the wall clock); packed with no record made on the
        task's path."""
        offset = self._offset
        if offset:
            oid, tid, submitted, queued, dispatched, settled, *worker = stamps
            stamps = (
                oid,
                tid,
                to_wall(submitted, offset),
                to_wall(queued, offset),
                to_wall(dispatched, offset),
                to_wall(settled, offset),
                *worker,
            )
        index = self._index.get(address)
        if index is None:
            index = self._index[address] = len(self._addresses)
            self._addresses.append(address)
        self._records.append(_RECORD.pack(owner, *stamps, index))

    def all(self) -> tuple[TimelineRecord, ...]:
        """Every record, oldest first (an observer's timeline)."""
        return tuple(self._unpack(r) for r in self._records)

    def take(self, owner: int) -> tuple[TimelineRecord, ...]:
        """``owner``'s records, oldest first, which are then forgotten."""
        mine = [r for r in self._records if _OWNER.unpack_from(r)[0] == owner]
        if mine:
            kept = [r for r in self._records if _OWNER.unpack_from(r)[0] != owner]
            self._records.clear()
            self._records.extend(kept)
        return tuple(self._unpack(r) for r in mine)

    def rename(self, was: int, now: int) -> None:
        """``was``'s records are ``now``'s (a driver on a new connection)."""
        if not any(_OWNER.unpack_from(r)[0] == was for r in self._records):
            return
        renamed = _OWNER.pack(now)
        kept = [renamed + r[8:] if _OWNER.unpack_from(r)[0] == was else r for r in self._records]
        self._records.clear()
        self._records.extend(kept)

    def _unpack(self, packed: bytes) -> TimelineRecord:
        _, oid, tid, submitted, queued, dispatched, settled, arrived, started, ended, at = (
            _RECORD.unpack(packed)
        )
        return TimelineRecord(
            oid, tid, submitted, queued, dispatched, settled, arrived, started, ended,
            self._addresses[at],
        )  # fmt: skip
