"""The head's timeline of finished tasks, packed: what `dista timeline` reads.

A `TimelineRecord` as a named tuple of Python ints costs about 500 bytes (nanosecond stamps
are large ints of their own), so the head's 100,000 records took about 50 MiB, kept after
every driver left (and a fuzzer's hostile drivers left the head 1.9x its idle size that
way). Each record is kept here as one 100-byte string instead (its owner's link, the
object and task IDs, the seven stamps, an index into a table of worker addresses, and for
a dashboard its function's ID and its number with a failed bit), about 135 bytes in all:
a quarter. Records are unpacked only when asked for.

Answering is bounded too (docs/protocol.md, "Bounded answers"): a driver's request with no
records left is answered from a count per owner, without a scan; an observer's reply (count
then records, up to the cap: 8.4 MB for 100,000) is packed straight from the kept strings;
the requests of one pass share it (`Answers`), and it is not kept past the pass: 8 MB
held for an observer long gone would be the head's largest object.

The head's four stamps come in on its monotonic clock (its ``now``) and are kept as wall-clock
nanoseconds: ``wall_offset_ns`` (wall minus monotonic, read once by the runtime) is added
here, once. The worker's three came converted by the worker (`Worker`'s spans).

An actor call is recorded too, from its worker's span (`ActorSpans`), under a task ID made
of the actor's type and the call's method (`actor_call_task_id`), so that a process that
knows the class names both; its head stamps but ``settled`` are 0 (unknown: the head keeps
no times per call).

A dashboard asks for the records numbered after the last it saw (`since`): what finished
meanwhile, walked back from the newest, so that watching a busy head costs it per new
record, not per kept one. Records a driver took (`take`) before the dashboard asked are
not shown to it.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from typing import Final

from . import frame as F
from ._conventions import TASK_ID_MASK
from ._events import Address, TimelineRecord

__all__ = ["TimelineLog", "actor_call_task_id"]

#: owner link, object ID, task ID, submitted, queued, dispatched, settled, arrived,
#: started, ended, the worker address's index; then for a dashboard (`since`) the
#: function's ID and the record's number, doubled, plus 1 if its result failed.
_RECORD: Final = struct.Struct("<qQQqqqqqqqIQQ")
_TAIL: Final = struct.Struct("<QQ")
_ROW: Final = struct.Struct("<QQqqqqB")  # `SNAPSHOT_ROW` without the address
_OWNER: Final = struct.Struct("<q")
_INDEX: Final = struct.Struct("<I")
_COUNT: Final = struct.Struct("<Q")


def actor_call_task_id(type_id: int, method_id: int) -> int:
    """The task ID of an actor call's timeline record: a hash of the actor's type ID and
    the call's method ID (the method ID alone names no class: it hashes the method's name),
    which a process that knows the class maps back to ``Class.method``."""
    both = (type_id & TASK_ID_MASK).to_bytes(8, "little") + method_id.to_bytes(8, "little")
    digest = hashlib.blake2b(both, digest_size=8, person=b"dista-call").digest()
    return int.from_bytes(digest, "little") & TASK_ID_MASK


class TimelineLog:
    """At most ``cap`` records, the oldest dropped first, each with the link of its
    driver (the owner); the head's stamps moved to the wall clock by ``wall_offset_ns``."""

    __slots__ = ("_addresses", "_index", "_offset", "_owned", "_records", "_wire", "added")

    def __init__(self, cap: int, wall_offset_ns: int = 0) -> None:
        self._records: deque[bytes] = deque(maxlen=cap)
        self._addresses: list[Address] = []
        self._index: dict[Address, int] = {}
        self._wire: dict[bytes, bytes] = {}  # a record's index bytes -> its address's 12
        self._offset = wall_offset_ns
        self._owned: dict[int, int] = {}  # owner link -> how many records it has here
        self.added: int = 0  # records ever added: the last one's number

    def __len__(self) -> int:
        return len(self._records)

    def add(
        self,
        owner: int,
        oid: int,
        task_id: int,
        submitted: int,
        queued: int,
        dispatched: int,
        settled: int,
        arrived: int,
        started: int,
        ended: int,
        address: Address,
        function: int = 0,
        failed: bool = False,
    ) -> None:
        """A finished task of ``owner``'s, with a `TimelineRecord`'s fields in its order
        (the four head stamps on the monotonic clock, 0 unknown; the three worker stamps on
        the wall clock); packed with no record nor tuple made on the task's path (every
        task and actor call comes here: `to_wall` written out)."""
        offset = self._offset
        if offset:
            submitted = submitted + offset if submitted else 0
            queued = queued + offset if queued else 0
            dispatched = dispatched + offset if dispatched else 0
            settled = settled + offset if settled else 0
        index = self._index.get(address)
        if index is None:
            index = self._index[address] = len(self._addresses)
            self._addresses.append(address)
            self._wire[_INDEX.pack(index)] = F.encode_addr(address.host, address.port)
        records = self._records
        if len(records) == records.maxlen and records:
            self._drop_owner(_OWNER.unpack_from(records[0])[0])  # the oldest goes
        records.append(
            _RECORD.pack(
                owner,
                oid,
                task_id,
                submitted,
                queued,
                dispatched,
                settled,
                arrived,
                started,
                ended,
                index,
                function or task_id,
                self.added * 2 + 2 + failed,  # (number ``added + 1``)
            )
        )
        self.added += 1
        owned = self._owned
        owned[owner] = owned.get(owner, 0) + 1

    def _drop_owner(self, owner: int, n: int = 1) -> None:
        left = self._owned.get(owner, 0) - n
        if left > 0:
            self._owned[owner] = left
        else:
            self._owned.pop(owner, None)

    def all(self) -> tuple[TimelineRecord, ...]:
        """Every record, oldest first (an observer's timeline)."""
        return tuple(self._unpack(r) for r in self._records)

    def packed(self) -> bytes:
        """Every record as the timeline reply's payload (count, then 84 bytes each, oldest
        first): what `all` gives, encoded, straight from the kept strings."""
        wire = self._wire
        # A kept record's wire part (object ID, task ID, the seven stamps) is [8:80], its
        # worker address's index [80:]. (Literal slices: mypyc's compiled core takes a
        # slice held in a name for an integer index.)
        body = b"".join([r[8:80] + wire[r[80:84]] for r in self._records])
        return _COUNT.pack(len(self._records)) + body

    def since(self, number: int, cap: int) -> tuple[bytes, int, bool]:
        """The records numbered after ``number`` as a snapshot's rows (`SNAPSHOT_ROW`),
        oldest first and at most ``cap`` of them; the last one's number; whether more
        follow. A number past the last (a dashboard of a head before this one) starts over;
        records dropped meanwhile are skipped. Walks back from the newest: no scan."""
        if number > self.added:
            number = 0
        fresh = []
        for r in reversed(self._records):
            if _TAIL.unpack_from(r, 84)[1] >> 1 <= number:
                break
            fresh.append(r)
        fresh.reverse()
        more = len(fresh) > cap
        if more:
            fresh = fresh[:cap]
        last = _TAIL.unpack_from(fresh[-1], 84)[1] >> 1 if more else self.added
        wire = self._wire
        rows = []
        for r in fresh:
            _, oid, _, submitted, _, dispatched, _, _, started, ended, _, function, tail = (
                _RECORD.unpack(r)
            )
            row = _ROW.pack(oid, function, submitted, dispatched, started, ended, tail & 1)
            rows.append(row + wire[r[80:84]])
        return b"".join(rows), last, more

    def count(self, owner: int) -> int:
        """How many of ``owner``'s records are kept."""
        return self._owned.get(owner, 0)

    def take(self, owner: int) -> tuple[TimelineRecord, ...]:
        """``owner``'s records, oldest first, which are then forgotten."""
        if owner not in self._owned:
            return ()  # nothing of its: no scan (a driver asking again and again)
        del self._owned[owner]
        mine = [r for r in self._records if _OWNER.unpack_from(r)[0] == owner]
        kept = [r for r in self._records if _OWNER.unpack_from(r)[0] != owner]
        self._records.clear()
        self._records.extend(kept)
        return tuple(self._unpack(r) for r in mine)

    def rename(self, was: int, now: int) -> None:
        """``was``'s records are ``now``'s (a driver on a new connection)."""
        n = self._owned.pop(was, 0)
        if not n:
            return
        self._owned[now] = self._owned.get(now, 0) + n
        renamed = _OWNER.pack(now)
        kept = [renamed + r[8:] if _OWNER.unpack_from(r)[0] == was else r for r in self._records]
        self._records.clear()
        self._records.extend(kept)

    def _unpack(self, packed: bytes) -> TimelineRecord:
        _, oid, tid, submitted, queued, dispatched, settled, arrived, started, ended, at, _, _ = (
            _RECORD.unpack(packed)
        )
        return TimelineRecord(
            oid, tid, submitted, queued, dispatched, settled, arrived, started, ended,
            self._addresses[at],
        )  # fmt: skip
