"""What executors' and pools' tasks run on a worker, and how their functions travel.

A chunk of calls runs as one task whose function is made here, per user function
(`chunk_task`): a small closure that calls `run_chunk` with the user's function, the pool's
`Setup` and how to call it. `remote_call` sends it by value, pickled once (a plain
function's pickle is kept), and each worker loads it once by digest; a chunk's task then
carries only its items. A function of its own per user function matters on the worker: it
learns per function which tasks are short enough to run inline on its loop
(`dista_runtime._execution.inline`), and one shared chunk function would let a map of tiny
calls teach it that a pool's long calls are short too (a long call run inline holds the
worker's loop: no cancel reaches it).

A user function that travels by value (a lambda, a closure, one of ``__main__``) rides in
the closure as a `Packed`: pickled with its source lines, which the worker puts in
`linecache`, so that a remote traceback shows them (the closure's own source is ours).

An initializer (`Pool(initializer=...)`, `Executor(initializer=...)`) runs lazily: no task
can be aimed at one particular worker, so instead every task of such a pool carries the
pool's `Setup`, and a worker runs the initializer the first time it runs one of that pool's
tasks, before the task, once per pool and worker process (a replaced worker runs it again).
If it raises, the task fails with its error and the next task of that pool on that worker
tries again (`multiprocessing.Pool` would start workers that die, for ever).
"""

from __future__ import annotations

import pickle
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from .._api.calls import call_name
from .._values.codec import dumps
from .._values.names import LABEL_ATTRIBUTE
from .._values.registry import importable, load_function, pickle_function

__all__ = ["Setup", "call_task", "chunk_task", "make_setup", "run_call", "run_chunk"]

#: (the pool's unique ID, the pickle of (initializer, initargs))
Setup = tuple[str, bytes]

#: How many task functions the driver keeps (most programs map a handful of functions).
_KEPT: Final = 256
_lock = threading.Lock()
_tasks: OrderedDict[tuple[object, ...], Callable[..., Any]] = OrderedDict()
_ready: set[str] = set()
_setup_lock = threading.Lock()


class Packed:
    """A function pickled with its source; it unpickles, on a worker, as the function."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __reduce__(self) -> tuple[object, ...]:
        return (load_function, (self.data,))


def _carried(fn: Callable[..., Any]) -> Callable[..., Any] | Packed:
    if type(fn) is not types.FunctionType or (importable(fn) and fn.__name__ != "<lambda>"):
        return fn  # by name, or pickled as it is (a partial, a bound method)
    return Packed(pickle_function(fn)[1])


def _made(
    key: tuple[object, ...], fn: Callable[..., Any], make: Callable[[], Callable[..., Any]]
) -> Callable[..., Any]:
    """The task function for ``key``: kept for a plain function, as `remote_call` keeps its
    pickle (a script's function sees the globals it had when first sent, as a forked
    pool's workers see those of the moment they were forked); made anew for any other
    callable, whose state may have changed since."""
    if type(fn) is not types.FunctionType:
        return _checked(fn, make)
    with _lock:
        found = _tasks.get(key)
        if found is not None:
            _tasks.move_to_end(key)
            return found
    made = _checked(fn, make)
    with _lock:
        _tasks[key] = made
        if len(_tasks) > _KEPT:
            _tasks.popitem(last=False)
    return made


def _checked(fn: Callable[..., Any], make: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"{fn!r} is not callable")
    try:
        return make()
    except Exception as e:
        raise TypeError(f"{call_name(fn)} cannot be sent to a worker: {e}") from e


def chunk_task(
    fn: Callable[..., Any], setup: Setup | None, star: bool
) -> Callable[[bytes | list[Any]], list[Any]]:
    """The task function that runs a chunk of calls of ``fn`` (`run_chunk`)."""

    def make() -> Callable[..., Any]:
        carried = _carried(fn)

        def chunk(items: bytes | list[Any]) -> list[Any]:
            return run_chunk(setup, carried, items, star)  # type: ignore[arg-type]

        chunk.__qualname__ = f"chunks of {call_name(fn)}"
        setattr(chunk, LABEL_ATTRIBUTE, f"{call_name(fn)} (in chunks)")  # for people
        return chunk

    return _made(("chunk", fn, setup, star), fn, make)


def call_task(fn: Callable[..., Any], setup: Setup) -> Callable[..., Any]:
    """The task function that runs one call of ``fn`` after the pool's initializer."""

    def make() -> Callable[..., Any]:
        carried = _carried(fn)

        def call(*args: Any, **kwargs: Any) -> Any:
            return run_call(setup, carried, args, kwargs)  # type: ignore[arg-type]

        call.__qualname__ = f"call of {call_name(fn)}"
        setattr(call, LABEL_ATTRIBUTE, call_name(fn))
        return call

    return _made(("call", fn, setup), fn, make)


def make_setup(
    pool_id: str, initializer: Callable[..., object] | None, initargs: Iterable[Any]
) -> Setup | None:
    """What a pool's tasks carry so that workers run ``initializer(*initargs)`` first."""
    if initializer is None:
        return None
    if not callable(initializer):
        raise TypeError("initializer must be a callable")
    try:
        return pool_id, dumps((initializer, tuple(initargs)))
    except Exception as e:
        raise TypeError(f"the initializer and its arguments cannot be pickled: {e}") from e


def _set_up(setup: Setup | None) -> None:
    if setup is None:
        return
    pool_id, data = setup
    if pool_id in _ready:
        return
    with _setup_lock:  # one thread runs it; others of the same worker wait for it
        if pool_id in _ready:
            return
        initializer, initargs = pickle.loads(data)
        initializer(*initargs)
        _ready.add(pool_id)


def run_chunk(
    setup: Setup | None, fn: Callable[..., Any], chunk: bytes | list[Any], star: bool
) -> list[Any]:
    """A chunk as one task: ``fn(*args)`` (``star``) or ``fn(item)`` for each, in order
    (the chunk comes pickled, unless it holds refs: `dista_runtime._pools.runner`)."""
    _set_up(setup)
    items: list[Any] = pickle.loads(chunk) if isinstance(chunk, bytes) else chunk
    if star:
        return [fn(*args) for args in items]
    return [fn(item) for item in items]


def run_call(
    setup: Setup | None, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Any:
    """One call of a pool with an initializer (one without calls ``fn`` directly)."""
    _set_up(setup)
    return fn(*args, **kwargs)
