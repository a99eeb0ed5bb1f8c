"""Running any callable on the cluster without decorating it: what executors and pools use.

`remote_call(fn, args, kwargs)` queues ``fn(*args, **kwargs)`` as a task and returns its
ref, as ``task(fn).remote(*args, **kwargs)`` would, with two differences that matter to
code that wraps other people's callables:

- Nothing is registered. A decorated task's name joins the process's registry (which a
  session's registry hash covers); a callable run through here always travels by value
  (`dista:by-value`), so importing a module that runs callables this way never changes
  which workers may serve the driver.
- Any picklable callable: a function of ``__main__``, a lambda, a closure, a
  ``functools.partial``, a bound method, a builtin. Importable functions pickle by
  reference (their module is imported on the worker), the rest by value (cloudpickle).

Plain functions are pickled once and the pickle reused (its digest lets each worker load
it once), as a decorated task's is; other callables (a bound method, a partial) are
pickled at every call, since their state may change between calls.
"""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._session import context as _context
from .._values import names
from .._values.codec import encode_call_carrying
from .._values.ids import BY_VALUE_NAME
from .._values.ids import task_id as _task_id
from .._values.registry import by_value_argument, pickle_function
from .labels import label
from .ref import ObjectRef

__all__ = ["call_name", "remote_call"]

#: How many plain functions keep their pickle (most programs run a handful).
_CACHED: Final = 256
_lock = threading.Lock()
_pickles: OrderedDict[types.FunctionType, tuple[bytes, bytes]] = OrderedDict()


def call_name(fn: Callable[..., Any]) -> str:
    """How errors and the timeline name ``fn``: ``module.qualname`` where it has them (a
    functools.partial: its function's)."""
    return names.qualified(fn)


def _pickled(fn: Callable[..., Any]) -> tuple[bytes, bytes]:
    if type(fn) is not types.FunctionType:
        return pickle_function(fn)
    with _lock:
        found = _pickles.get(fn)
        if found is not None:
            _pickles.move_to_end(fn)
            return found
    made = pickle_function(fn)
    with _lock:
        _pickles[fn] = made
        if len(_pickles) > _CACHED:
            _pickles.popitem(last=False)
    return made


def remote_call(
    fn: Callable[..., Any],
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    max_retries: int | None = None,
) -> ObjectRef[Any]:
    """Queue ``fn(*args, **kwargs)`` on the cluster this process joined; its ref at once.

    Refs among the arguments (at any depth) become the task's inputs, as with ``.remote``.
    Raises `TypeError` at once when ``fn`` is not callable or cannot be pickled, and
    `DistaError` when the process has joined no cluster.
    """
    if not callable(fn):
        raise TypeError(f"{fn!r} is not callable")
    context = _context.session()
    name = call_name(fn)
    argument, inputs, handles = encode_call_carrying(args, dict(kwargs or {}), ObjectRef, name)
    try:
        digest, data = _pickled(fn)
    except Exception as e:
        raise TypeError(f"{name} cannot be sent to a worker: {e}") from e
    live = context.session
    tid = _task_id(BY_VALUE_NAME, max_retries)
    oid = live.submit(tid, by_value_argument(digest, data, argument), inputs, 1)
    label(oid, name)  # by-value tasks share one task ID: the timeline names them so
    ref: ObjectRef[Any] = ObjectRef(oid, live)
    if handles:
        ref._keep = handles
    return ref
