"""Reading the head's snapshot defensively, and the names a person reads.

The snapshot is JSON from another process, possibly of another version: a missing or
mistyped field reads as empty (0, "", []) rather than failing the whole page, so one new or
renamed field costs one blank cell, not the dashboard (docs: notes/dashboard-spec.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "Record",
    "as_float",
    "as_int",
    "as_str",
    "driver_label",
    "hex_id",
    "maybe_int",
    "records",
    "sub",
    "worker_label",
]

#: One JSON object of the snapshot.
Record = Mapping[str, object]


def as_int(record: Record, key: str) -> int:
    value = record.get(key)
    # bool is an int to Python, but a JSON true is no count.
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def maybe_int(record: Record, key: str) -> int | None:
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(record: Record, key: str) -> float:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def as_str(record: Record, key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) else ""


def sub(record: Record, key: str) -> Record:
    """The object under ``key``, or an empty one."""
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def records(record: Record, key: str) -> list[Record]:
    """The list of objects under ``key``; anything else in it is skipped."""
    value = record.get(key)
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def hex_id(value: int) -> str:
    """A u64 ID for the browser: JSON numbers are doubles there, exact only to 2**53."""
    return f"{value:#x}"


def worker_label(address: str, pid: int | None) -> str:
    return f"{address} (pid {pid})" if pid is not None else address


def driver_label(driver: Record) -> str:
    """``driver 3 (10.0.0.5, pid 811)``: its number says which, host and pid where."""
    kind = as_str(driver, "kind") or "driver"
    where = [part for part in (as_str(driver, "host"),) if part]
    pid = maybe_int(driver, "pid")
    if pid is not None:
        where.append(f"pid {pid}")
    suffix = f" ({', '.join(where)})" if where else ""
    return f"{kind} {as_int(driver, 'number')}{suffix}"
