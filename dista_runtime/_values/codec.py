"""Encoding values: pickle protocol 5, large buffers out of band, refs as persistent IDs.

An encoded value is one buffer. Without out-of-band buffers it is the pickle itself (it
starts with the pickle PROTO opcode, 0x80). With them it is::

    0x01, count u32, the pickle's length u64, each buffer's length u64,
    the pickle, then each buffer at a 64-byte aligned offset

so the receiver unpickles with memoryviews into the one buffer the value arrived in: a
NumPy array or bytearray result is not copied again after it lands. Object refs inside a
call's arguments (at any depth, in any container) pickle as persistent IDs: their index in
the task-after inputs, which the worker puts back as the inputs' values.

Pickles are plain pickle where that is enough, cloudpickle where it is not: classes and
functions of ``__main__`` (a script run with ``python`` or ``dista run``, a notebook, a
REPL), lambdas, closures and local classes travel by value, as in Ray. Plain pickle would
send a ``__main__`` class by name, and no other process has it under that name (a worker's
``__main__`` is its command line), so the plain pickler refuses those and the value is
pickled again by cloudpickle. Its hook runs only for objects of non-builtin types, and each
thread keeps its pickler, so a small plain value costs what `pickle.dumps` costs. Buffers
under 32 KiB stay inside the pickle (a small NumPy array is cheaper copied than framed).

The one buffer comes from `allocate` (`dista_runtime._values.memory`): from ``MAP_FROM`` bytes, an
anonymous map faulted in ahead of the copy, which is several times cheaper than faulting
fresh pages in one by one as the copy touches them. On a worker, a large one is a memory
file instead (`dista_runtime._values.shared`), which fetchers on its host map. The binding passes the same allocator
to the fetcher, so a large object read from a worker lands in one too.
"""

from __future__ import annotations

import io
import pickle
import struct
import threading
import types
from collections import ChainMap
from collections.abc import Callable, Sequence
from typing import Any, Final

import cloudpickle

from dista_proto.frame import Bytes

from .memory import MAP_FROM, allocate, write_into
from .shared import store_value

__all__ = [
    "MAP_FROM",
    "allocate",
    "decode",
    "decode_actor_call",
    "decode_call",
    "describe_unpicklable",
    "dumps",
    "dumps_by_value",
    "encode",
    "encode_call",
    "encode_call_carrying",
    "encode_parts",
    "note_carried",
    "pack_inputs",
]

_OOB: Final = 0x01
_ALIGN: Final = 64
_SIMPLE: Final = frozenset({int, float, str, bytes, bool, type(None)})
_HEAD = struct.Struct("<BIQ")
#: Buffers smaller than this stay inside the pickle: the envelope costs more than a copy.
_IN_BAND: Final = 32 << 10
#: Modules the user asked cloudpickle to send by value (`cloudpickle.register_pickle_by_value`):
#: while there are any, every value that is not plain goes through cloudpickle.
_REGISTERED: Final[set[str]] = getattr(cloudpickle.cloudpickle, "_PICKLE_BY_VALUE_MODULES", {""})
_Keep = Callable[[pickle.PickleBuffer], bool]


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
    header = struct.pack(
        f"<BIQ{len(raws)}Q", _OOB, len(raws), len(data), *(r.nbytes for r in raws)
    )
    shared = store_value(offset, [(0, header), (head, data), *zip(offsets, raws, strict=True)])
    if shared is not None:  # a worker's: in a memory file its host's fetchers map
        return shared
    out = allocate(offset)
    view = memoryview(out)
    view[:head] = header
    write_into(view[head : head + len(data)], data)
    for start, raw in zip(offsets, raws, strict=True):
        write_into(view[start : start + raw.nbytes], raw)
    return out


def _parts(data: bytes, buffers: list[pickle.PickleBuffer]) -> list[Bytes]:
    """What `_join` makes, as the buffers to write one after another: nothing is copied."""
    if not buffers:
        return [data]
    raws = [b.raw() for b in buffers]
    head = struct.pack(f"<BIQ{len(raws)}Q", _OOB, len(raws), len(data), *(r.nbytes for r in raws))
    out: list[Bytes] = [head, data]
    offset = len(head) + len(data)
    for raw in raws:
        pad = -offset % _ALIGN
        if pad:
            out.append(bytes(pad))
        out.append(raw)
        offset += pad + raw.nbytes
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


class _ByValue(Exception):
    """Raised by `_Pickler` on meeting what plain pickle would send by a name the receiver
    cannot look up: encode again with cloudpickle."""


_CODE: Final = (type, types.FunctionType)


class _Pickler(pickle.Pickler):
    """Plain pickle, which refuses classes and functions of ``__main__``.

    Pickle would send them by name, and the receiver's ``__main__`` is another module (a
    worker's is its command line; a driver's is the user's script). Its hook runs only for
    objects that are not of a builtin type (containers, numbers and strings go through C
    alone), so plain values cost what plain pickle costs.
    """

    def reducer_override(self, obj: object) -> Any:
        if isinstance(obj, _CODE) and getattr(obj, "__module__", None) == "__main__":
            raise _ByValue
        return NotImplemented


def _code_in_file(make: Callable[..., types.CodeType], args: Any, filename: str) -> types.CodeType:
    return make(*args).replace(co_filename=filename)


_cloud_code_reduce: Callable[[types.CodeType], Any] | None = getattr(
    cloudpickle.cloudpickle, "_code_reduce", None
)


def _code_reduce(code: types.CodeType) -> Any:
    """cloudpickle's reduction of a code object, but keeping its file name (cloudpickle
    writes ``<dynamic-code>``), so that a worker's traceback can show the lines."""
    assert _cloud_code_reduce is not None
    make, args = _cloud_code_reduce(code)
    return _code_in_file, (make, args, code.co_filename)


class _CloudPickler(cloudpickle.Pickler):  # type: ignore[misc]
    """cloudpickle: classes and functions of ``__main__``, lambdas, closures and local
    classes travel by value (a class keeps its identity: cloudpickle tracks it by an ID, so
    a driver gets its own class back). Code keeps its file name."""

    if _cloud_code_reduce is not None:
        dispatch_table = ChainMap(
            {types.CodeType: _code_reduce}, cloudpickle.Pickler.dispatch_table
        )


class _RefIDs:
    """Refs pickle as persistent IDs: their index among a call's inputs."""

    ref_type: type | None = None

    def __init__(self, file: _Writer, keep: _Keep | None) -> None:
        super().__init__(file, protocol=5, buffer_callback=keep)  # type: ignore[call-arg]
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


class _CallPickler(_RefIDs, _Pickler):
    pass


class _CloudCallPickler(_RefIDs, _CloudPickler):
    pass


class _Writer:
    """A pickler's file: the pieces it writes, joined once at the end."""

    __slots__ = ("chunks", "write")

    def __init__(self) -> None:
        self.chunks: list[Bytes] = []
        self.write = self.chunks.append

    def take(self) -> bytes:
        chunks = self.chunks
        data = chunks[0] if len(chunks) == 1 and type(chunks[0]) is bytes else b"".join(chunks)
        chunks.clear()
        return data


class _Keeper:
    """A buffer callback: small buffers stay in the pickle (cheaper than the envelope), the
    rest go to ``buffers`` (with None, every buffer stays in)."""

    def __init__(self, buffers: list[pickle.PickleBuffer] | None = None) -> None:
        self.buffers = buffers

    def keep(self, buffer: pickle.PickleBuffer) -> bool:
        buffers = self.buffers
        if buffers is None or buffer.raw().nbytes < _IN_BAND:
            return True
        buffers.append(buffer)
        return False


class _Picklers(_Keeper):
    """A thread's plain picklers, kept: making a pickler costs more than a small pickle."""

    def __init__(self) -> None:
        super().__init__()
        self.file = _Writer()
        self.busy = False
        self.plain = _Pickler(self.file, protocol=5, buffer_callback=self.keep)
        self.call = _CallPickler(self.file, self.keep)

    def dump(
        self, value: object, buffers: list[pickle.PickleBuffer] | None, ref_type: type | None
    ) -> tuple[bytes, list[int]] | None:
        """The pickle and the refs' IDs, or None if plain pickle cannot (or must not)."""
        self.busy = True
        self.buffers = buffers
        inputs = _NO_INPUTS
        if ref_type is None:
            pickler: _Pickler = self.plain
        else:
            pickler = call = self.call
            call.ref_type = ref_type
            inputs = call.inputs = []
            call.index = {}
        try:
            pickler.dump(value)
            out: tuple[bytes, list[int]] | None = self.file.take(), inputs
        except Exception:  # _ByValue, or a lambda, a closure, a local class: for cloudpickle
            self.file.chunks.clear()
            out = None
        pickler.clear_memo()  # let go of the value
        self.buffers = None
        self.busy = False
        return out


_NO_INPUTS: Final[list[int]] = []
_mine = threading.local()


def _picklers() -> _Picklers:
    picklers: _Picklers | None = getattr(_mine, "picklers", None)
    if picklers is None:
        picklers = _mine.picklers = _Picklers()
    elif picklers.busy:  # a value's __reduce__ encoding another value
        return _Picklers()
    return picklers


def _dumps(
    value: object, buffers: list[pickle.PickleBuffer] | None, ref_type: type | None = None
) -> tuple[bytes, list[int]]:
    """The pickle of ``value`` and the IDs of the refs in it: plain pickle when it
    suffices, else cloudpickle; raises if neither can. Buffers of `_IN_BAND` bytes or more
    go to ``buffers``, or with None stay in the pickle."""
    if not _REGISTERED:
        done = _picklers().dump(value, buffers, ref_type)
        if done is not None:
            return done
        if buffers is not None:
            buffers.clear()
    file = _Writer()
    keep = _Keeper(buffers).keep
    cloud: _CloudPickler
    if ref_type is None:
        cloud = _CloudPickler(file, protocol=5, buffer_callback=keep)
    else:
        cloud = _CloudCallPickler(file, keep)
        cloud.ref_type = ref_type
    cloud.dump(value)
    return file.take(), cloud.inputs if isinstance(cloud, _RefIDs) else []


def dumps_by_value(value: object) -> bytes:
    """``value`` as one pickle from cloudpickle (functions, classes by value; code keeps
    its file name), buffers and all."""
    file = _Writer()
    _CloudPickler(file, protocol=5).dump(value)
    return file.take()


def dumps(value: object) -> bytes:
    """``value`` as one pickle, buffers and all (plain pickle, or cloudpickle if need be)."""
    if type(value) in _SIMPLE:
        return pickle.dumps(value, protocol=5)
    return _dumps(value, None)[0]


class _LargeBytes:
    """A large ``bytes`` value, pickled with its bytes out of band (plain pickle copies them
    into the pickle): they are copied once, into the value's buffer, which a worker keeps
    in a memory file for fetchers on its host to map (`dista_runtime._values.shared`)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> tuple[type[bytes], tuple[pickle.PickleBuffer]]:
        return bytes, (pickle.PickleBuffer(self.data),)


def encode(value: object, what: str = "the value") -> Bytes:
    """``value`` as one buffer; a value that does not pickle raises TypeError naming it."""
    if type(value) in _SIMPLE:
        if type(value) is bytes and len(value) >= MAP_FROM:
            return _join(*_pickled(_LargeBytes(value), what))
        return pickle.dumps(value, protocol=5)
    return _join(*_pickled(value, what))


def encode_parts(value: object, what: str = "the value") -> list[Bytes]:
    """`encode`, as buffers to write in order rather than one: a large NumPy array or
    bytearray in ``value`` is written from where it lies (an actor's checkpoint)."""
    return _parts(*_pickled(value, what))


def _pickled(value: object, what: str) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """The pickle of ``value`` and its out-of-band buffers; TypeError naming ``what``."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        data, _ = _dumps(value, buffers)
    except Exception as e:
        raise TypeError(describe_unpicklable(what, value, e)) from e
    return data, buffers


def decode(value: Bytes) -> Any:
    data, buffers = _split(value)
    return pickle.loads(data, buffers=buffers)


def describe_unpicklable(what: str, value: object, error: BaseException) -> str:
    return (
        f"{what} ({type(value).__qualname__}) cannot be pickled: {error}. "
        "Pass values that pickle (plain data, NumPy arrays, classes, functions); locks, "
        "sockets, open files and generators cannot travel."
    )


def encode_call(
    args: tuple[object, ...], kwargs: dict[str, object], ref_type: type, name: str
) -> tuple[Bytes, list[int]]:
    """A call's arguments as one buffer, and the object IDs of the refs found in them."""
    if not kwargs and all(type(a) in _SIMPLE for a in args):
        return pickle.dumps((args, kwargs), protocol=5), []
    buffers: list[pickle.PickleBuffer] = []
    try:
        data, inputs = _dumps((args, kwargs), buffers, ref_type)
    except Exception as e:
        raise TypeError(_name_bad_argument(name, args, kwargs, ref_type, e)) from e
    return _join(data, buffers), inputs


class _Carried(threading.local):
    """What the call being encoded on this thread carries besides refs: the objects that
    asked to be noted while pickled (`note_carried`: an actor handle, whose actor the
    call's refs keep alive)."""

    def __init__(self) -> None:
        self.collecting = False
        self.found: list[object] = []  # one list per thread: no allocation a call


_carried = _Carried()


def note_carried(value: object) -> None:
    """Called by an object being pickled: the call being encoded carries it."""
    if _carried.collecting:
        _carried.found.append(value)


def encode_call_carrying(
    args: tuple[object, ...], kwargs: dict[str, object], ref_type: type, name: str
) -> tuple[Bytes, list[int], tuple[object, ...]]:
    """`encode_call`, and the objects that asked to be noted while pickled (`note_carried`),
    in order: a call's refs keep the actors whose handles it carries, so an actor made for
    a call (``use.remote(Counter.remote())``) lives while its result is wanted."""
    carried = _carried
    carried.collecting = True
    try:
        argument, inputs = encode_call(args, kwargs, ref_type, name)
    except BaseException:
        carried.found.clear()
        raise
    finally:
        carried.collecting = False
    found = carried.found
    if not found:
        return argument, inputs, ()
    noted = tuple(found)
    found.clear()
    return argument, inputs, noted


def _name_bad_argument(
    name: str,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    ref_type: type,
    error: BaseException,
) -> str:
    for label, value in [*((f"argument {i}", a) for i, a in enumerate(args)), *kwargs.items()]:
        try:
            _dumps(value, [], ref_type)
        except Exception as e:
            if label in kwargs:
                label = f"argument {label!r}"
            return describe_unpicklable(f"{label} of {name}", value, e)
    return f"the arguments of {name} cannot be pickled: {error}"


#: An actor call's argument with its refs' values (or why they failed) after it.
_WITH_INPUTS: Final = 0x02
_INPUTS_HEAD = struct.Struct("<BIQ")
_INPUT = struct.Struct("<QBQ")  # object ID, failed, length


def pack_inputs(argument: Bytes, inputs: Sequence[tuple[int, Bytes | str]]) -> bytes:
    """An actor call's argument (from `encode_call`) with the values its refs had when the
    caller read them: an input that failed carries its error's text instead."""
    parts: list[Bytes] = [_INPUTS_HEAD.pack(_WITH_INPUTS, len(inputs), len(argument))]
    bodies: list[Bytes] = [argument]
    for oid, value in inputs:
        body = value.encode() if isinstance(value, str) else value
        parts.append(_INPUT.pack(oid, isinstance(value, str), len(body)))
        bodies.append(body)
    return b"".join([*parts, *bodies])


class InputFailedError(Exception):
    """A ref among an actor call's arguments had failed when the caller read it."""


def decode_actor_call(argument: Bytes) -> tuple[tuple[object, ...], dict[str, object]]:
    """An actor call's ``(args, kwargs)``, refs replaced by their values (`pack_inputs`)."""
    view = memoryview(argument).cast("B")
    if not view.nbytes or view[0] != _WITH_INPUTS:
        return decode_call(view, ())
    _, count, size = _INPUTS_HEAD.unpack_from(view, 0)
    offset = _INPUTS_HEAD.size + count * _INPUT.size
    call = view[offset : offset + size]
    offset += size
    inputs = []
    for i in range(count):
        oid, failed, length = _INPUT.unpack_from(view, _INPUTS_HEAD.size + i * _INPUT.size)
        body = view[offset : offset + length]
        offset += length
        if failed:
            raise InputFailedError(f"input {oid:#x} failed: {bytes(body).decode()}")
        inputs.append(body)
    return decode_call(call, inputs)


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
