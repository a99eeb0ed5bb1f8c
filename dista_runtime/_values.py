"""Encoding values: pickle protocol 5, large buffers out of band, refs as persistent IDs.

An encoded value is one buffer. Without out-of-band buffers it is the pickle itself (it
starts with the pickle PROTO opcode, 0x80). With them it is::

    0x01, count u32, the pickle's length u64, each buffer's length u64,
    the pickle, then each buffer at a 64-byte aligned offset

so the receiver unpickles with memoryviews into the one buffer the value arrived in: a
NumPy array or bytearray result is not copied again after it lands. Object refs inside a
call's arguments (at any depth, in any container) pickle as persistent IDs: their index in
the task-after inputs, which the worker puts back as the inputs' values.

The one buffer comes from `allocate` (`dista_runtime._memory`): from ``MAP_FROM`` bytes, an
anonymous map faulted in ahead of the copy, which is several times cheaper than faulting
fresh pages in one by one as the copy touches them. The binding passes the same allocator
to the fetcher, so a large object read from a worker lands in one too.
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from dista_proto.frame import Bytes

from ._memory import MAP_FROM, allocate, write_into

__all__ = [
    "MAP_FROM",
    "allocate",
    "decode",
    "decode_call",
    "describe_unpicklable",
    "encode",
    "encode_call",
]

_OOB: Final = 0x01
_ALIGN: Final = 64
_SIMPLE: Final = frozenset({int, float, str, bytes, bool, type(None)})
_HEAD = struct.Struct("<BIQ")


def _join(data: bytes, buffers: list[pickle.PickleBuffer]) -> Bytes:
    if not buffers:
        return data
    raws = [b.raw() for b in buffers]
    head = _HEAD.size + 8 * len(raws)
    offset = head + len(data)
    offsets = []
    for raw in raws:
        offset = -(-offset // _ALIGN) * _ALIGN
        offsets.append(offset)
        offset += raw.nbytes
    out = allocate(offset)
    _HEAD.pack_into(out, 0, _OOB, len(raws), len(data))
    struct.pack_into(f"<{len(raws)}Q", out, _HEAD.size, *(r.nbytes for r in raws))
    view = memoryview(out)
    write_into(view[head : head + len(data)], data)
    for start, raw in zip(offsets, raws, strict=True):
        write_into(view[start : start + raw.nbytes], raw)
    return out


def _split(value: Bytes) -> tuple[memoryview, list[memoryview]]:
    view = memoryview(value).cast("B") if not isinstance(value, memoryview) else value
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    if not view.nbytes or view[0] != _OOB:
        return view, []
    _, count, size = _HEAD.unpack_from(view, 0)
    lengths = struct.unpack_from(f"<{count}Q", view, _HEAD.size)
    head = _HEAD.size + 8 * count
    offset = head + size
    buffers = []
    for length in lengths:
        offset = -(-offset // _ALIGN) * _ALIGN
        buffers.append(view[offset : offset + length])
        offset += length
    return view[head : head + size], buffers


def encode(value: object, what: str = "the value") -> Bytes:
    """``value`` as one buffer; a value that does not pickle raises TypeError naming it."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception as e:
        raise TypeError(describe_unpicklable(what, value, e)) from e
    return _join(data, buffers)


def decode(value: Bytes) -> Any:
    data, buffers = _split(value)
    return pickle.loads(data, buffers=buffers)


def describe_unpicklable(what: str, value: object, error: BaseException) -> str:
    return (
        f"{what} ({type(value).__qualname__}) cannot be pickled: {error}. "
        "Pass values that pickle (plain data, NumPy arrays, importable classes)."
    )


class _CallPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, buffers: list[pickle.PickleBuffer], ref_type: type):
        super().__init__(file, protocol=5, buffer_callback=buffers.append)
        self.ref_type = ref_type
        self.inputs: list[int] = []
        self.index: dict[int, int] = {}

    def persistent_id(self, obj: object) -> int | None:
        if type(obj) is self.ref_type:
            oid: int = obj.object_id  # type: ignore[attr-defined]
            slot = self.index.get(oid)
            if slot is None:
                slot = self.index[oid] = len(self.inputs)
                self.inputs.append(oid)
            return slot
        return None


def encode_call(
    args: tuple[object, ...], kwargs: dict[str, object], ref_type: type, name: str
) -> tuple[Bytes, list[int]]:
    """A call's arguments as one buffer, and the object IDs of the refs found in them."""
    if not kwargs and all(type(a) in _SIMPLE for a in args):
        return pickle.dumps((args, kwargs), protocol=5), []
    buffers: list[pickle.PickleBuffer] = []
    file = io.BytesIO()
    pickler = _CallPickler(file, buffers, ref_type)
    try:
        pickler.dump((args, kwargs))
    except Exception as e:
        raise TypeError(_name_bad_argument(name, args, kwargs, e)) from e
    return _join(file.getvalue(), buffers), pickler.inputs


def _name_bad_argument(
    name: str, args: tuple[object, ...], kwargs: dict[str, object], error: BaseException
) -> str:
    for label, value in [*((f"argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]:
        try:
            pickle.dumps(value, protocol=5)
        except Exception as e:
            if label in kwargs:
                label = f"argument {label!r}"
            return describe_unpicklable(f"{label} of {name}", value, e)
    return f"the arguments of {name} cannot be pickled: {error}"


class _CallUnpickler(pickle.Unpickler):
    def __init__(
        self, file: io.BytesIO | memoryview, buffers: list[memoryview], load: Callable[[int], Any]
    ) -> None:
        stream = file if isinstance(file, io.BytesIO) else io.BytesIO(file)
        super().__init__(stream, buffers=buffers)
        self._input = load

    def persistent_load(self, pid: object) -> Any:
        assert isinstance(pid, int)
        return self._input(pid)


def decode_call(
    argument: Bytes, inputs: Sequence[Bytes]
) -> tuple[tuple[object, ...], dict[str, object]]:
    data, buffers = _split(argument)
    if not inputs:
        args, kwargs = pickle.loads(data, buffers=buffers)
        return args, kwargs
    cache: dict[int, Any] = {}

    def load(slot: int) -> Any:
        if slot not in cache:
            cache[slot] = decode(inputs[slot])
        return cache[slot]

    args, kwargs = _CallUnpickler(data, buffers, load).load()
    return args, kwargs
