"""The shapes ``.remote`` is typed by, so refs pass where values are expected, with no plugin.

No type system maps each parameter of a ``ParamSpec`` to ``T | ObjectRef[T]`` (PEP 612 has
no such operator), so `RemoteCall` (a task's ``.remote`` as checkers see it) is overloaded
per number of leading positional arguments, one to `MAX_ARITY`, each matched against the
task's own signature (its ``_signature``):

- ``TakesN``: exactly N positional arguments ``A0..`` (parameters with defaults may be left
  out), each accepted as ``ObjectRef[Ai] | Ai`` (the ref first: a generic task given a ref
  solves its type variable to the value's type, not to the ref's);
- ``ThenN``: N leading positional arguments so, then the rest exactly as the function takes
  them (``Concatenate[A0, .., P]``): a ref among the first N, keywords after it.

``GivesN`` and ``ThenGivesN`` add ``_results``, what a call gives, for `RemoteCallMany`
(tasks with several results). The last overload is the exact ``ParamSpec`` one: a ref
passed by keyword, or past `MAX_ARITY`, is an error there unless mypy runs with
``dista_runtime.mypy_plugin`` (which replaces the overloads by the task's exact signature,
widened), or the ref is wrapped in `dista_runtime.value_of`. `ActorCall` types
``handle.remote(Cls.method, ...)`` from the method, the same way.

Only checkers read these: they are ``Protocol`` classes nothing instantiates. The overloads
differ only in their number of arguments, which no type system lets one write once.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar, overload

from . import call_shapes as cs
from .ref import ObjectRef

__all__ = ["MAX_ARITY", "ActorCall", "RemoteCall", "RemoteCallMany"]

#: Leading positional arguments typed one by one, refs allowed.
MAX_ARITY: Final = 6

P = ParamSpec("P")
Q = ParamSpec("Q")
R = TypeVar("R")
T = TypeVar("T")
O = TypeVar("O")
R_co = TypeVar("R_co", covariant=True)
O_co = TypeVar("O_co", covariant=True)
S_co = TypeVar("S_co", covariant=True)
B0 = TypeVar("B0")
B1 = TypeVar("B1")
B2 = TypeVar("B2")
B3 = TypeVar("B3")
B4 = TypeVar("B4")
B5 = TypeVar("B5")


class RemoteCall(Protocol[P, R_co]):
    """What ``task.remote`` is to checkers: called as the function is, a ref where a value is
    expected in the first `MAX_ARITY` positional places, giving ``ObjectRef[R]``. (At run
    time ``.remote`` is a plain method; mypy's plugin types it more exactly still.)"""

    def _signature(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    @overload
    def __call__(self: cs.Takes1[B0, T], a0: ObjectRef[B0] | B0, /) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Takes2[B0, B1, T], a0: ObjectRef[B0] | B0, a1: ObjectRef[B1] | B1, /
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Takes3[B0, B1, B2, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Takes4[B0, B1, B2, B3, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Takes5[B0, B1, B2, B3, B4, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Takes6[B0, B1, B2, B3, B4, B5, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Then1[B0, Q, T], a0: ObjectRef[B0] | B0, /, *args: Q.args, **kwargs: Q.kwargs
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Then2[B0, B1, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Then3[B0, B1, B2, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Then4[B0, B1, B2, B3, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Then5[B0, B1, B2, B3, B4, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: cs.Then6[B0, B1, B2, B3, B4, B5, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R_co]: ...


class RemoteCallMany(Protocol[P, O_co]):
    """`RemoteCall` for tasks with several results: a call gives ``O``, a tuple of refs."""

    def _signature(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...
    def _results(self) -> O_co: ...

    @overload
    def __call__(self: cs.Gives1[B0, O], a0: ObjectRef[B0] | B0, /) -> O: ...
    @overload
    def __call__(
        self: cs.Gives2[B0, B1, O], a0: ObjectRef[B0] | B0, a1: ObjectRef[B1] | B1, /
    ) -> O: ...
    @overload
    def __call__(
        self: cs.Gives3[B0, B1, B2, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.Gives4[B0, B1, B2, B3, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.Gives5[B0, B1, B2, B3, B4, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.Gives6[B0, B1, B2, B3, B4, B5, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.ThenGives1[B0, Q, O], a0: ObjectRef[B0] | B0, /, *args: Q.args, **kwargs: Q.kwargs
    ) -> O: ...
    @overload
    def __call__(
        self: cs.ThenGives2[B0, B1, Q, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.ThenGives3[B0, B1, B2, Q, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.ThenGives4[B0, B1, B2, B3, Q, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.ThenGives5[B0, B1, B2, B3, B4, Q, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> O: ...
    @overload
    def __call__(
        self: cs.ThenGives6[B0, B1, B2, B3, B4, B5, Q, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> O: ...
    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> O_co: ...


class ActorCall(Protocol[S_co]):
    """What `ActorHandle.remote` is to checkers: ``h.remote(Counter.add, 5)`` calls the method
    ``add`` of the actor with its own parameters (a ref where a value is expected in the
    first `MAX_ARITY` positional places), an ``async def`` one too, and gives
    ``ObjectRef[R]``. Any checker types it from the method itself: no plugin, no attribute
    of the handle."""

    @overload
    def __call__(self, method: Callable[[S_co], Coroutine[Any, Any, R]], /) -> ObjectRef[R]: ...
    @overload
    def __call__(self, method: Callable[[S_co], R], /) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self, method: Callable[[S_co, B0], Coroutine[Any, Any, R]], a0: ObjectRef[B0] | B0, /
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self, method: Callable[[S_co, B0], R], a0: ObjectRef[B0] | B0, /
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2, B3], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2, B3], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2, B3, B4], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2, B3, B4], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2, B3, B4, B5], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[[S_co, B0, B1, B2, B3, B4, B5], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, Q], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, Q], R],
        a0: ObjectRef[B0] | B0,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, Q], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, Q], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, Q], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, Q], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, B3, Q], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, B3, Q], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, B3, B4, Q], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, B3, B4, Q], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, B3, B4, B5, Q], Coroutine[Any, Any, R]],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, B0, B1, B2, B3, B4, B5, Q], R],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self,
        method: Callable[Concatenate[S_co, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self, method: Callable[Concatenate[S_co, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> ObjectRef[R]: ...
