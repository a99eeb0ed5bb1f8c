"""What every remote function shares: its function, its IDs, and how a call is queued.

`RemoteFunction` and its kin (`remote_function`) add the typed ``.remote``; this is the part
that runs: arity checked at the call, arguments encoded with their refs as inputs, the
function sent by name when workers can import it and by value when they cannot.
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any, Final

from .._session import context as _context
from .._session.session import Session
from .._values.codec import encode_call_carrying
from .._values.ids import BY_VALUE_NAME
from .._values.ids import task_id as _task_id
from .._values.registry import by_value_argument, importable, pickle_function, register
from .arity import Arity
from .labels import label
from .ref import ObjectRef

__all__ = ["KEEP", "Keep", "Remote", "make_ref"]


class Remote:
    """What every kind of remote function shares: the function, its ID, how to submit."""

    def __init__(self, fn: Callable[..., Any], num_returns: int, max_retries: int | None):
        if num_returns < 1:
            raise ValueError(f"num_returns must be at least 1, not {num_returns}")
        self._fn = fn
        self._arity = Arity(fn, f"{getattr(fn, '__qualname__', fn)}.remote")
        self.num_returns = num_returns
        self.max_retries = max_retries
        self.is_async: bool = inspect.iscoroutinefunction(fn)
        self.name: str = register(fn) or f"{fn.__module__}:{fn.__qualname__}"
        self._id = _task_id(self.name, max_retries)
        self._by_value_id = _task_id(BY_VALUE_NAME, max_retries)
        self._importable = importable(fn)
        self._pickled: tuple[bytes, bytes] | None = None
        #: What the timeline calls its calls (`options(name=...)`); None: the function's name.
        self.label: str | None = None
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def _submit(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[int, Session, tuple[object, ...]]:
        """Queue the call; its first result ID, the session that owns it, and the actor
        handles among its arguments (its refs keep them)."""
        self._arity.check(args, kwargs)  # a call that cannot bind fails here, not at get()
        session = _context.session()
        argument, inputs, handles = encode_call_carrying(args, kwargs, ObjectRef, self.name)
        if self.name in session.names:
            tid = self._id
        else:
            if self._pickled is None:
                self._pickled = pickle_function(self._fn)  # with its source, for tracebacks
            digest, data = self._pickled
            argument = by_value_argument(digest, data, argument)
            tid = self._by_value_id
        live = session.session
        oid = live.submit(tid, argument, inputs, self.num_returns)
        if self.label is not None:
            label(oid, self.label)
        return oid, live, handles

    def __reduce__(self) -> tuple[object, ...]:
        # Captured by a function that travels by value: importable tasks go by name (the
        # worker imports them), the rest rebuild around their function, pickled by value.
        if self._importable:
            return (_import_task, (self._fn.__module__, self._fn.__qualname__))
        return (_rebuild, (type(self), self._fn, self.num_returns, self.max_retries))

    def __repr__(self) -> str:
        return f"<dista task {self.name}>"


def make_ref(oid: int, session: Session, keep: tuple[object, ...]) -> ObjectRef[Any]:
    ref: ObjectRef[Any] = ObjectRef(oid, session)
    if keep:
        ref._keep = keep
    return ref


def _import_task(module: str, qualname: str) -> object:
    target: object = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _rebuild(
    cls: type[Remote], fn: Callable[..., Any], num_returns: int, max_retries: int | None
) -> Remote:
    return cls(fn, num_returns, max_retries)


class Keep(enum.Enum):
    """`options`' default for ``max_retries``: keep the task's (None is the head's)."""

    KEEP = enum.auto()


KEEP: Final = Keep.KEEP
