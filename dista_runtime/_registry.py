"""Which functions workers can import by name, and which travel by value.

Every decorated task lands here. A task whose module a worker can import (not
``__main__``, not defined inside a function) is known by its registry ID; the rest travel
by value: cloudpickled once per function, cached on each worker by digest, run under one
well-known task ID. The registry hash a session sends is taken when it starts, over the
importable tasks known then; a task registered later travels by value, so it still runs.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Iterable
from typing import Any, Final

from dista_proto.frame import Bytes

from ._ids import BY_VALUE_NAME, name_hash, registry_hash

__all__ = [
    "BY_VALUE_ID",
    "digest_of",
    "by_value_argument",
    "importable",
    "lookup",
    "modules",
    "register",
    "snapshot",
    "split_by_value",
]

BY_VALUE_ID: Final = name_hash(BY_VALUE_NAME)
_BY_VALUE = struct.Struct("<16sI")

_tasks: dict[str, Callable[..., Any]] = {}  # name -> the user's function
_by_hash: dict[int, Callable[..., Any]] = {}


def importable(fn: Callable[..., Any]) -> bool:
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    return bool(module) and module != "__main__" and "<locals>" not in qualname


def task_name(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}:{fn.__qualname__}"


def register(fn: Callable[..., Any]) -> str | None:
    """Record ``fn``; its registry name, or None when it must travel by value."""
    if not importable(fn):
        return None
    name = task_name(fn)
    _tasks[name] = fn
    _by_hash[name_hash(name)] = fn
    return name


def snapshot() -> tuple[frozenset[str], int]:
    """The names known now and their registry hash: what a session starts with."""
    names = frozenset(_tasks)
    return names, registry_hash(names)


def modules(names: Iterable[str]) -> list[str]:
    """The modules a worker imports to know ``names``."""
    return sorted({_tasks[n].__module__ for n in names})


def lookup(task_id: int) -> Callable[..., Any] | None:
    return _by_hash.get(task_id & ((1 << 60) - 1))


def by_value_argument(digest: bytes, function: Bytes, call: Bytes) -> bytes:
    return b"".join([_BY_VALUE.pack(digest, len(function)), function, call])


def split_by_value(argument: Bytes) -> tuple[bytes, memoryview, memoryview]:
    view = memoryview(argument).cast("B")
    digest, size = _BY_VALUE.unpack_from(view, 0)
    start = _BY_VALUE.size
    return digest, view[start : start + size], view[start + size :]


def digest_of(data: Bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()
