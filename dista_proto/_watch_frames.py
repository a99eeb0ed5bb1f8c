"""The frames a dashboard needs, and their codecs: labels (42), vitals (43), snapshot (44).

They are Dista's extensions (docs/protocol.md, "Extensions: the dashboard"), kept apart from
`_encode`/`_decode`, which hold the page's kinds. A snapshot's answer carries the timeline
records a dashboard has not seen as fixed rows (`SNAPSHOT_ROW`), not JSON: the head packs
them from the strings its timeline keeps, and the dashboard unpacks them (`snapshot_rows`),
so that a busy head spends nothing per record on text.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from . import frame as F
from ._encode import Encoded
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import Address, Event, Labels, Snapshot, Vitals
from .frame import Bytes

__all__ = [
    "ROW_FAILED",
    "SNAPSHOT_ROW",
    "SnapshotRow",
    "decode_labels",
    "decode_snapshot",
    "decode_vitals",
    "encode_labels",
    "encode_snapshot",
    "encode_vitals",
    "snapshot_rows",
]

_U32: Final = struct.Struct("<I")
_ENTRY: Final = struct.Struct("<QH")  # a label's ID and its length
_VITALS: Final = struct.Struct("<QQQQQ")
_U64_MAX: Final = (1 << 64) - 1
#: A snapshot's timeline row: object ID, function ID, submitted, dispatched (the head's
#: wall clock), started, ended (the worker's), flags (`ROW_FAILED`), the worker's address.
SNAPSHOT_ROW: Final = struct.Struct("<QQqqqqB12s")
ROW_FAILED: Final = 1


class SnapshotRow(NamedTuple):
    """One finished task or actor call of a snapshot (stamps in wall-clock nanoseconds)."""

    object_id: int
    function: int
    submitted: int
    dispatched: int
    started: int
    ended: int
    failed: bool
    address: Address


def _bad(kind: int, field: str, why: str) -> LocalProtocolError:
    return LocalProtocolError(f"{F.kind_name(kind)}: {field}: {why}", kind=kind, field=field)


def _fail(kind: int, field: str, why: str) -> RemoteProtocolError:
    return RemoteProtocolError(f"{F.kind_name(kind)}: {field}: {why}", kind=kind, field=field)


def encode_labels(e: Labels, from_head: bool) -> Encoded:
    k = F.KIND_LABELS
    if len(e.entries) > F.MAX_LABELS:
        raise _bad(k, "entries", f"{len(e.entries)} entries, over MAX_LABELS ({F.MAX_LABELS})")
    if not 0 <= e.start <= _U64_MAX:
        raise _bad(k, "start", f"{e.start} is not a u64")
    out = bytearray(_U32.pack(len(e.entries)))
    for ident, label in e.entries:
        data = label.encode("utf-8", "replace")
        if not 0 < len(data) <= F.MAX_LABEL:
            raise _bad(k, "label", f"{len(data)} bytes: must be 1 to MAX_LABEL ({F.MAX_LABEL})")
        if not 0 <= ident <= _U64_MAX:
            raise _bad(k, "id", f"{ident} is not a u64")
        out += _ENTRY.pack(ident, len(data))
        out += data
    return k, 0, e.start, bytes(out), None


def decode_labels(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_LABELS
    if len(p) < 4:
        raise _fail(k, "count", f"needs 4 bytes, {len(p)} remain")
    (n,) = _U32.unpack_from(p)
    if n > F.MAX_LABELS:
        raise _fail(k, "count", f"{n} entries, over MAX_LABELS ({F.MAX_LABELS})")
    pos = 4
    entries = []
    for _ in range(n):
        if len(p) - pos < _ENTRY.size:
            raise _fail(k, "entries", "end of payload inside an entry")
        ident, size = _ENTRY.unpack_from(p, pos)
        pos += _ENTRY.size
        if not 0 < size <= F.MAX_LABEL or len(p) - pos < size:
            raise _fail(k, "label", f"{size} bytes: must be 1 to MAX_LABEL and present")
        try:
            label = bytes(p[pos : pos + size]).decode("utf-8")
        except UnicodeDecodeError:
            raise _fail(k, "label", "is not UTF-8") from None
        if not label.isprintable():
            raise _fail(k, "label", "has control characters")  # it goes into logs and pages
        pos += size
        entries.append((ident, label))
    if pos != len(p):
        raise _fail(k, "payload", f"{len(p) - pos} unexpected trailing bytes")
    return Labels(tuple(entries), tid)


def encode_vitals(e: Vitals, from_head: bool) -> Encoded:
    k = F.KIND_VITALS
    values = (e.pid, e.rss, e.checkpoints, e.checkpoint_bytes, e.checkpoint_ns)
    if not all(0 <= v <= _U64_MAX for v in values):
        raise _bad(k, "payload", f"each of {values} must be a u64")
    return k, 0, 0, _VITALS.pack(*values), None


def decode_vitals(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    if len(p) != _VITALS.size:
        raise _fail(F.KIND_VITALS, "payload", f"must be {_VITALS.size} bytes, not {len(p)}")
    return Vitals(*_VITALS.unpack_from(p))


def encode_snapshot(e: Snapshot, from_head: bool) -> Encoded:
    k = F.KIND_SNAPSHOT
    if not 0 <= e.since <= _U64_MAX:
        raise _bad(k, "since", f"{e.since} is not a u64")
    if from_head != (e.document is not None):
        raise _bad(k, "document", "the head's answer carries one, an observer's request none")
    if e.document is None:
        if e.rows:
            raise _bad(k, "rows", "only the head's answer carries rows")
        return k, e.since, 0, b"", None
    if len(e.rows) % SNAPSHOT_ROW.size:
        raise _bad(k, "rows", f"{len(e.rows)} bytes is not a whole number of rows")
    text = e.document.encode("utf-8")
    return k, e.since, 0, _U32.pack(len(text)) + text, e.rows


def decode_snapshot(oid: int, tid: int, p: Bytes, from_head: bool) -> Event:
    k = F.KIND_SNAPSHOT
    if not from_head:
        if p:
            raise _fail(k, "payload", f"a request is empty, not {len(p)} bytes")
        return Snapshot(oid)
    if len(p) < 4:
        raise _fail(k, "document", f"needs 4 bytes, {len(p)} remain")
    (size,) = _U32.unpack_from(p)
    if size > len(p) - 4:
        raise _fail(k, "document", f"{size} bytes, {len(p) - 4} remain")
    try:
        document = bytes(p[4 : 4 + size]).decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(k, "document", "is not UTF-8") from None
    rows = bytes(p[4 + size :])
    if len(rows) % SNAPSHOT_ROW.size:
        raise _fail(k, "rows", f"{len(rows)} bytes is not a whole number of rows")
    return Snapshot(oid, document, rows)


def snapshot_rows(rows: bytes) -> list[SnapshotRow]:
    """A snapshot's packed rows, oldest first."""
    out = []
    for (
        oid,
        function,
        submitted,
        dispatched,
        started,
        ended,
        flags,
        where,
    ) in SNAPSHOT_ROW.iter_unpack(rows):
        ip, port, _ = F.decode_addr(where, 0)
        host = ".".join(map(str, ip))
        row = (oid, function, submitted, dispatched, started, ended)
        out.append(SnapshotRow(*row, bool(flags & ROW_FAILED), Address(host, port)))
    return out
