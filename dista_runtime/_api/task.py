"""``@task``: a function that runs on the cluster, typed end to end.

``add.remote(1, 2)`` queues ``add(1, 2)`` and returns an `ObjectRef[int]` at once; calling
``add(1, 2)`` still runs it here. Refs anywhere in the arguments (nested in lists, dicts,
any object) become the task's inputs: the head starts it once they exist and the worker
puts their values in their place, so a chain of tasks never waits on the driver.
``num_returns=n`` makes a task-many: the function returns an n-tuple and ``.remote``
gives n refs. ``max_retries`` bounds reruns after a lost worker (the head's default is 3).

Typing: ``.remote`` takes the function's own parameters (a ``ParamSpec``). A ref where a
value is expected (``add.remote(ref, 3)``) type-checks under mypy with the plugin
``dista_runtime.mypy_plugin``, which widens each parameter ``T`` to ``T | ObjectRef[T]``.
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Final, Generic, Literal, ParamSpec, Self, TypeVar, overload

from .._session import context as _context
from .._session.session import Session
from .._values.codec import encode_call_carrying
from .._values.ids import BY_VALUE_NAME
from .._values.ids import task_id as _task_id
from .._values.registry import by_value_argument, importable, pickle_function, register
from .arity import Arity
from .labels import label
from .ref import ObjectRef

__all__ = ["RemoteFunction", "RemoteFunction2", "RemoteFunction3", "RemoteFunctionN", "task"]

P = ParamSpec("P")
R = TypeVar("R")
R1 = TypeVar("R1")
R2 = TypeVar("R2")
R3 = TypeVar("R3")


class _Remote:
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

    def _options(
        self, num_returns: int | None, max_retries: int | _Keep | None, name: str | None
    ) -> Any:
        """A copy with other options (`options`): this one is left as it is."""
        retries = self.max_retries if isinstance(max_retries, _Keep) else max_retries
        returns = self.num_returns if num_returns is None else num_returns
        kind = {1: RemoteFunction, 2: RemoteFunction2, 3: RemoteFunction3}
        made: _Remote = kind.get(returns, RemoteFunctionN)(self._fn, returns, retries)
        made.label = self.label if name is None else name
        return made

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


def _ref(oid: int, session: Session, keep: tuple[object, ...]) -> ObjectRef[Any]:
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
    cls: type[_Remote], fn: Callable[..., Any], num_returns: int, max_retries: int | None
) -> _Remote:
    return cls(fn, num_returns, max_retries)


class _Keep(enum.Enum):
    """`options`' default for ``max_retries``: keep the task's (None is the head's)."""

    KEEP = enum.auto()


KEEP: Final = _Keep.KEEP


class RemoteFunction(_Remote, Generic[P, R]):
    """A task with one result."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._fn(*args, **kwargs)
        return result

    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[1] | None = None,
        max_retries: int | _Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction[P, R]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[2],
        max_retries: int | _Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction2[P, Any, Any]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[3],
        max_retries: int | _Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction3[P, Any, Any, Any]: ...
    @overload
    def options(
        self, *, num_returns: int, max_retries: int | _Keep | None = KEEP, name: str | None = None
    ) -> RemoteFunctionN[P]: ...
    def options(
        self,
        *,
        num_returns: int | None = None,
        max_retries: int | _Keep | None = KEEP,
        name: str | None = None,
    ) -> Any:
        """This task with other options for the calls made through what it returns, as
        Ray's ``f.options(...)``: ``num_returns`` (its function must then return that many
        values), ``max_retries`` (None: the head's default), ``name`` (what the timeline
        calls these calls). ``f.options(name="load").remote(x)``; ``f`` itself is unchanged."""
        return self._options(num_returns, max_retries, name)

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R]:
        oid, s, kept = self._submit(args, kwargs)
        return _ref(oid, s, kept)


class RemoteFunction2(_Remote, Generic[P, R1, R2]):
    """A task with two results (``num_returns=2``)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2]:
        result: tuple[R1, R2] = self._fn(*args, **kwargs)
        return result

    def options(self, *, max_retries: int | _Keep | None = KEEP, name: str | None = None) -> Self:
        """As `RemoteFunction.options`, with its number of results kept."""
        made: Self = self._options(None, max_retries, name)
        return made

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> tuple[ObjectRef[R1], ObjectRef[R2]]:
        oid, s, kept = self._submit(args, kwargs)
        return _ref(oid, s, kept), _ref(oid + 1, s, kept)


class RemoteFunction3(_Remote, Generic[P, R1, R2, R3]):
    """A task with three results (``num_returns=3``)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2, R3]:
        result: tuple[R1, R2, R3] = self._fn(*args, **kwargs)
        return result

    def options(self, *, max_retries: int | _Keep | None = KEEP, name: str | None = None) -> Self:
        """As `RemoteFunction.options`, with its number of results kept."""
        made: Self = self._options(None, max_retries, name)
        return made

    def remote(
        self, *args: P.args, **kwargs: P.kwargs
    ) -> tuple[ObjectRef[R1], ObjectRef[R2], ObjectRef[R3]]:
        oid, s, kept = self._submit(args, kwargs)
        return _ref(oid, s, kept), _ref(oid + 1, s, kept), _ref(oid + 2, s, kept)


class RemoteFunctionN(_Remote, Generic[P]):
    """A task with ``num_returns`` results, typed as a tuple of refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]:
        result: tuple[Any, ...] = self._fn(*args, **kwargs)
        return result

    def options(self, *, max_retries: int | _Keep | None = KEEP, name: str | None = None) -> Self:
        """As `RemoteFunction.options`, with its number of results kept."""
        made: Self = self._options(None, max_retries, name)
        return made

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> tuple[ObjectRef[Any], ...]:
        oid, s, kept = self._submit(args, kwargs)
        return tuple(_ref(oid + i, s, kept) for i in range(self.num_returns))


class _Decorator:
    def __init__(self, max_retries: int | None) -> None:
        self.max_retries = max_retries

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> RemoteFunction[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> RemoteFunction[P, R]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction[Any, Any]:
        return RemoteFunction(fn, 1, self.max_retries)


class _Decorator2:
    def __init__(self, max_retries: int | None) -> None:
        self.max_retries = max_retries

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2]]], /
    ) -> RemoteFunction2[P, R1, R2]: ...
    @overload
    def __call__(self, fn: Callable[P, tuple[R1, R2]], /) -> RemoteFunction2[P, R1, R2]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction2[Any, Any, Any]:
        return RemoteFunction2(fn, 2, self.max_retries)


class _Decorator3:
    def __init__(self, max_retries: int | None) -> None:
        self.max_retries = max_retries

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2, R3]]], /
    ) -> RemoteFunction3[P, R1, R2, R3]: ...
    @overload
    def __call__(
        self, fn: Callable[P, tuple[R1, R2, R3]], /
    ) -> RemoteFunction3[P, R1, R2, R3]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction3[Any, Any, Any, Any]:
        return RemoteFunction3(fn, 3, self.max_retries)


class _DecoratorN:
    def __init__(self, num_returns: int, max_retries: int | None) -> None:
        self.num_returns = num_returns
        self.max_retries = max_retries

    def __call__(self, fn: Callable[P, Any], /) -> RemoteFunctionN[P]:
        return RemoteFunctionN(fn, self.num_returns, self.max_retries)


@overload
def task(fn: Callable[P, Coroutine[Any, Any, R]], /) -> RemoteFunction[P, R]: ...
@overload
def task(fn: Callable[P, R], /) -> RemoteFunction[P, R]: ...
@overload
def task(  # type: ignore[overload-overlap]
    *, num_returns: Literal[1] = 1, max_retries: int | None = None
) -> _Decorator: ...
@overload
def task(  # type: ignore[overload-overlap]
    *, num_returns: Literal[2], max_retries: int | None = None
) -> _Decorator2: ...
@overload
def task(  # type: ignore[overload-overlap]
    *, num_returns: Literal[3], max_retries: int | None = None
) -> _Decorator3: ...
@overload
def task(*, num_returns: int, max_retries: int | None = None) -> _DecoratorN: ...
def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    num_returns: int = 1,
    max_retries: int | None = None,
) -> RemoteFunction[Any, Any] | _Decorator | _Decorator2 | _Decorator3 | _DecoratorN:
    """Make ``fn`` a task: ``@task`` or ``@task(num_returns=2, max_retries=1)``."""
    if fn is not None:
        return RemoteFunction(fn, 1, None)
    if num_returns == 1:
        return _Decorator(max_retries)
    if num_returns == 2:
        return _Decorator2(max_retries)
    if num_returns == 3:
        return _Decorator3(max_retries)
    return _DecoratorN(num_returns, max_retries)
