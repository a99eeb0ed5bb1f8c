"""Which functions workers can import by name, and which travel by value.

Every decorated task lands here. A task whose module a worker can import (not
``__main__``, not defined inside a function) is known by its registry ID; the rest travel
by value: cloudpickled once per function, cached on each worker by digest, run under one
well-known task ID. The registry hash a session sends is taken when it starts, over the
importable tasks known then; a task registered later travels by value, so it still runs.

A function travelling by value takes its source lines along (best effort: what `inspect`
finds on the driver, a notebook cell's too), and the worker hands them to `linecache`, so
a remote traceback shows the lines of a function the worker has no file for.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import struct
from collections.abc import Callable, Iterable
from typing import Any, Final

import cloudpickle

from dista_proto import TASK_ID_MASK, actor_call_task_id, function_id
from dista_proto.frame import Bytes

from . import names
from .codec import dumps_by_value
from .ids import ACTOR_BY_VALUE_NAME, BY_VALUE_NAME, PUT_NAME, method_id, name_hash, registry_hash

__all__ = [
    "ACTOR_BY_VALUE_ID",
    "BY_VALUE_ID",
    "PUT_ID",
    "Source",
    "by_value_argument",
    "call_label",
    "digest_of",
    "importable",
    "install_source",
    "label_actor_calls",
    "load_function",
    "lookup",
    "method_table",
    "modules",
    "name_hashes",
    "pickle_function",
    "register",
    "register_actor",
    "snapshot",
    "source_of",
    "split_by_value",
]

BY_VALUE_ID: Final = name_hash(BY_VALUE_NAME)
PUT_ID: Final = name_hash(PUT_NAME)
names.add(PUT_ID, "dista.put")
#: The type ID of actors whose class travels by value (defined in ``__main__``, a notebook).
ACTOR_BY_VALUE_ID: Final = name_hash(ACTOR_BY_VALUE_NAME)
#: (file name as in the code object, first line number, the lines' text)
Source = tuple[str, int, str]
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
    names.add(name_hash(name), names.label_of(fn))  # what its driver tells the head
    return name


def register_actor(name: str, cls: type) -> None:
    """Record importable actor class ``cls`` under ``name``: its type ID finds it."""
    _tasks[name] = cls
    _by_hash[name_hash(name)] = cls
    names.add(name_hash(name), names.label_of(cls))


#: Actor calls' timeline task IDs (`dista_proto.actor_call_task_id`) -> ``module.Class.method``.
_call_labels: dict[int, str] = {}


def label_actor_calls(type_id: int, cls: type) -> None:
    """Name the timeline records of calls to ``cls`` (type ``type_id``) in this process:
    under its own type ID, and under the by-value one (a by-value class of this process's
    with a method of that name first)."""
    label = f"{cls.__module__}.{cls.__qualname__}"
    names.add(type_id, label)
    for method, (mid, _) in method_table(cls).items():
        _call_labels[actor_call_task_id(type_id, mid)] = f"{label}.{method}"
        _call_labels.setdefault(actor_call_task_id(ACTOR_BY_VALUE_ID, mid), f"{label}.{method}")
        names.add(actor_call_task_id(type_id, mid), f"{label}.{method}")
        names.add(actor_call_task_id(ACTOR_BY_VALUE_ID, mid), f"{label}.{method}")


def call_label(task_id: int) -> str | None:
    """``module.Class.method`` of an actor call's timeline record, if this process knows it."""
    return _call_labels.get(task_id & TASK_ID_MASK)


def snapshot() -> tuple[frozenset[str], int]:
    """The names known now and their registry hash: what a session starts with."""
    names = frozenset(_tasks)
    return names, registry_hash(names)


def name_hashes(names: Iterable[str]) -> list[int]:
    """What a session's task-names frame says of ``names``: each one's hash, as its task
    ID's low bits carry it, so that the head knows which tasks a worker can run."""
    return [name_hash(name) for name in names]


def modules(names: Iterable[str]) -> list[str]:
    """The modules a worker imports to know ``names``."""
    return sorted({_tasks[n].__module__ for n in names})


def lookup(task_id: int) -> Callable[..., Any] | None:
    return _by_hash.get(task_id & TASK_ID_MASK)


def by_value_argument(digest: bytes, function: Bytes, call: Bytes) -> bytes:
    return b"".join([_BY_VALUE.pack(digest, len(function)), function, call])


def split_by_value(argument: Bytes) -> tuple[bytes, memoryview, memoryview]:
    view = memoryview(argument).cast("B")
    digest, size = _BY_VALUE.unpack_from(view, 0)
    start = _BY_VALUE.size
    return digest, view[start : start + size], view[start + size :]


def digest_of(data: Bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def source_of(fn: Callable[..., Any]) -> Source | None:
    """Where ``fn``'s lines are and what they say, if this process can find them."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    return code.co_filename, max(first, 1), "".join(lines)


def pickle_function(fn: Callable[..., Any]) -> tuple[bytes, bytes]:
    """``fn`` pickled by value with its source: (digest, the bytes of `by_value_argument`)."""
    source = source_of(fn)
    data = dumps_by_value(fn if source is None else (fn, source))
    digest = digest_of(data)
    # The head tells functions sent by value apart by their digest (`dp.function_id`).
    names.add(function_id(BY_VALUE_ID, digest, -1), names.label_of(fn))
    return digest, data


def load_function(pickled: Bytes) -> Callable[..., Any]:
    """What `pickle_function` made (or a bare cloudpickled function), its source installed."""
    loaded = cloudpickle.loads(pickled)
    if type(loaded) is tuple:
        function, source = loaded
        install_source(*source)
        return function  # type: ignore[no-any-return]
    return loaded  # type: ignore[no-any-return]


_installed: dict[str, list[str]] = {}


def install_source(filename: str, first: int, text: str) -> None:
    """Put ``text`` in `linecache` as lines ``first``.. of ``filename``, unless this process
    already reads those very lines there (its own copy of the file)."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start, end = first - 1, first - 1 + len(lines)
    have = linecache.getlines(filename)
    if have[start:end] == lines:
        return
    mine = _installed.get(filename)
    if mine is None:
        mine = _installed[filename] = list(have)
    if len(mine) < end:
        mine.extend("\n" for _ in range(end - len(mine)))
    mine[start:end] = lines
    # No modification time: `linecache.checkcache` leaves the entry alone.
    linecache.cache[filename] = (sum(map(len, mine)), None, mine, filename)


def method_table(cls: type) -> dict[str, tuple[int, bool]]:
    """Every public method of ``cls``: its ID, and whether it is ``async def``."""
    table = {}
    for name, value in inspect.getmembers(cls, callable):
        if name.startswith("_") or isinstance(value, type):
            continue
        table[name] = (method_id(name), inspect.iscoroutinefunction(value))
    return table
