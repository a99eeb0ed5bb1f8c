"""``@task``: a function that runs on the cluster, typed end to end.

``add.remote(1, 2)`` queues ``add(1, 2)`` and returns an `ObjectRef[int]` at once; calling
``add(1, 2)`` still runs it here. Refs anywhere in the arguments (nested in lists, dicts,
any object) become the task's inputs: the head starts it once they exist and the worker
puts their values in their place, so a chain of tasks never waits on the driver.
``num_returns=n`` makes a task-many: the function returns an n-tuple and ``.remote``
gives n refs (typed one by one up to six: `RemoteFunction2` to `RemoteFunction6`).
``max_retries`` bounds reruns after a lost worker (the head's default is 3).

Typing: ``.remote`` takes the function's own parameters, and under every checker a ref
where a value is expected in the first six positional places (`call_types`); mypy with
the plugin ``dista_runtime.mypy_plugin`` also takes refs as keywords and inside lists and
dicts, and names the task in its errors.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Literal, ParamSpec, TypeVar, overload

from .remote_function import (
    RemoteFunction,
    RemoteFunction2,
    RemoteFunction3,
    RemoteFunction4,
    RemoteFunction5,
    RemoteFunction6,
    RemoteFunctionN,
    remote_function,
)

__all__ = ["task"]

P = ParamSpec("P")
R = TypeVar("R")
R1 = TypeVar("R1")
R2 = TypeVar("R2")
R3 = TypeVar("R3")
R4 = TypeVar("R4")
R5 = TypeVar("R5")
R6 = TypeVar("R6")


class _Decorator:
    def __init__(self, max_retries: int | None, num_returns: int = 1) -> None:
        self.max_retries = max_retries
        self.num_returns = num_returns

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> RemoteFunction[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> RemoteFunction[P, R]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction[Any, Any]:
        return RemoteFunction(fn, 1, self.max_retries)


class _Decorator2(_Decorator):
    @overload  # type: ignore[override]
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2]]], /
    ) -> RemoteFunction2[P, R1, R2]: ...
    @overload
    def __call__(self, fn: Callable[P, tuple[R1, R2]], /) -> RemoteFunction2[P, R1, R2]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction2[Any, Any, Any]:
        made: RemoteFunction2[Any, Any, Any] = remote_function(fn, 2, self.max_retries)
        return made


class _Decorator3(_Decorator):
    @overload  # type: ignore[override]
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2, R3]]], /
    ) -> RemoteFunction3[P, R1, R2, R3]: ...
    @overload
    def __call__(
        self, fn: Callable[P, tuple[R1, R2, R3]], /
    ) -> RemoteFunction3[P, R1, R2, R3]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction3[Any, Any, Any, Any]:
        made: RemoteFunction3[Any, Any, Any, Any] = remote_function(fn, 3, self.max_retries)
        return made


class _Decorator4(_Decorator):
    @overload  # type: ignore[override]
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2, R3, R4]]], /
    ) -> RemoteFunction4[P, R1, R2, R3, R4]: ...
    @overload
    def __call__(
        self, fn: Callable[P, tuple[R1, R2, R3, R4]], /
    ) -> RemoteFunction4[P, R1, R2, R3, R4]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction4[Any, Any, Any, Any, Any]:
        made: RemoteFunction4[Any, Any, Any, Any, Any] = remote_function(fn, 4, self.max_retries)
        return made


class _Decorator5(_Decorator):
    @overload  # type: ignore[override]
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2, R3, R4, R5]]], /
    ) -> RemoteFunction5[P, R1, R2, R3, R4, R5]: ...
    @overload
    def __call__(
        self, fn: Callable[P, tuple[R1, R2, R3, R4, R5]], /
    ) -> RemoteFunction5[P, R1, R2, R3, R4, R5]: ...
    def __call__(self, fn: Callable[..., Any], /) -> RemoteFunction5[Any, Any, Any, Any, Any, Any]:
        made: RemoteFunction5[Any, Any, Any, Any, Any, Any] = remote_function(
            fn, 5, self.max_retries
        )
        return made


class _Decorator6(_Decorator):
    @overload  # type: ignore[override]
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, tuple[R1, R2, R3, R4, R5, R6]]], /
    ) -> RemoteFunction6[P, R1, R2, R3, R4, R5, R6]: ...
    @overload
    def __call__(
        self, fn: Callable[P, tuple[R1, R2, R3, R4, R5, R6]], /
    ) -> RemoteFunction6[P, R1, R2, R3, R4, R5, R6]: ...
    def __call__(
        self, fn: Callable[..., Any], /
    ) -> RemoteFunction6[Any, Any, Any, Any, Any, Any, Any]:
        made: RemoteFunction6[Any, Any, Any, Any, Any, Any, Any] = remote_function(
            fn, 6, self.max_retries
        )
        return made


class _DecoratorN(_Decorator):
    def __call__(self, fn: Callable[P, Any], /) -> RemoteFunctionN[P]:  # type: ignore[override]
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
def task(  # type: ignore[overload-overlap]
    *, num_returns: Literal[4], max_retries: int | None = None
) -> _Decorator4: ...
@overload
def task(  # type: ignore[overload-overlap]
    *, num_returns: Literal[5], max_retries: int | None = None
) -> _Decorator5: ...
@overload
def task(  # type: ignore[overload-overlap]
    *, num_returns: Literal[6], max_retries: int | None = None
) -> _Decorator6: ...
@overload
def task(*, num_returns: int, max_retries: int | None = None) -> _DecoratorN: ...
def task(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    num_returns: int = 1,
    max_retries: int | None = None,
) -> RemoteFunction[Any, Any] | _Decorator:
    """Make ``fn`` a task: ``@task`` or ``@task(num_returns=2, max_retries=1)``."""
    if fn is not None:
        return RemoteFunction(fn, 1, None)
    if num_returns < 1:
        raise ValueError(f"num_returns must be at least 1, not {num_returns}")
    kinds = {2: _Decorator2, 3: _Decorator3, 4: _Decorator4, 5: _Decorator5, 6: _Decorator6}
    return kinds.get(num_returns, _Decorator if num_returns == 1 else _DecoratorN)(
        max_retries, num_returns
    )
