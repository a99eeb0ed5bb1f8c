"""The shapes ``.remote`` is typed by, so refs pass where values are expected, with no plugin.

No type system maps each parameter of a ``ParamSpec`` to ``T | ObjectRef[T]`` (PEP 612 has
no such operator), so `RemoteCall` (a task's ``.remote`` as checkers see it) is overloaded
per number of positional arguments, one to `MAX_ARITY`: the overload for N arguments matches
the task against ``TakesN`` (its ``_signature``, the function's own, takes N positional
arguments ``A0..`` and gives ``R``), which binds each ``Ai`` to the declared parameter type;
the call then accepts ``ObjectRef[Ai] | Ai`` in that place (the ref first: a generic task
given a ref solves its type variable to the value's type, not to the ref's). `RemoteCallMany`
does the same for tasks with several results, whose ``_results`` (``GivesN``) says what a
call gives. The last overload of each is the exact ``ParamSpec`` one, for keywords, ``*args``
and more than `MAX_ARITY` arguments: a ref there is an error unless mypy runs with
``dista_runtime.mypy_plugin`` (which replaces the overloads by the task's exact signature),
or the ref is wrapped in `dista_runtime.value_of`. `ActorCall` types
``handle.remote(Cls.method, ...)`` from the method, the same way.

Only checkers read these: they are ``Protocol`` classes nothing instantiates.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar, overload

from .ref import ObjectRef

__all__ = [
    "MAX_ARITY",
    "Takes1",
    "Takes2",
    "Takes3",
    "Takes4",
    "Takes5",
    "Takes6",
    "Gives1",
    "Gives2",
    "Gives3",
    "Gives4",
    "Gives5",
    "Gives6",
    "RemoteCall",
    "ActorCall",
    "RemoteCallMany",
]

#: Positional arguments typed one by one (beyond it, the exact ``ParamSpec`` overload).
MAX_ARITY: Final = 6

A0_contra = TypeVar("A0_contra", contravariant=True)
A1_contra = TypeVar("A1_contra", contravariant=True)
A2_contra = TypeVar("A2_contra", contravariant=True)
A3_contra = TypeVar("A3_contra", contravariant=True)
A4_contra = TypeVar("A4_contra", contravariant=True)
A5_contra = TypeVar("A5_contra", contravariant=True)
P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)
O_co = TypeVar("O_co", covariant=True)


class Takes1(Protocol[A0_contra, R_co]):
    def _signature(self, a0: A0_contra, /) -> R_co: ...


class Takes2(Protocol[A0_contra, A1_contra, R_co]):
    def _signature(self, a0: A0_contra, a1: A1_contra, /) -> R_co: ...


class Takes3(Protocol[A0_contra, A1_contra, A2_contra, R_co]):
    def _signature(self, a0: A0_contra, a1: A1_contra, a2: A2_contra, /) -> R_co: ...


class Takes4(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, R_co]):
    def _signature(
        self, a0: A0_contra, a1: A1_contra, a2: A2_contra, a3: A3_contra, /
    ) -> R_co: ...


class Takes5(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, R_co]):
    def __call__(
        self, a0: A0_contra, a1: A1_contra, a2: A2_contra, a3: A3_contra, a4: A4_contra, /
    ) -> R_co: ...


class Takes6(Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, R_co]):
    def __call__(
        self,
        a0: A0_contra,
        a1: A1_contra,
        a2: A2_contra,
        a3: A3_contra,
        a4: A4_contra,
        a5: A5_contra,
        /,
    ) -> R_co: ...


class Gives1(Takes1[A0_contra, Any], Protocol[A0_contra, O_co]):
    def _results(self) -> O_co: ...


class Gives2(Takes2[A0_contra, A1_contra, Any], Protocol[A0_contra, A1_contra, O_co]):
    def _results(self) -> O_co: ...


class Gives3(
    Takes3[A0_contra, A1_contra, A2_contra, Any], Protocol[A0_contra, A1_contra, A2_contra, O_co]
):
    def _results(self) -> O_co: ...


class Gives4(
    Takes4[A0_contra, A1_contra, A2_contra, A3_contra, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, O_co],
):
    def _results(self) -> O_co: ...


class Gives5(
    Takes5[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, O_co],
):
    def _results(self) -> O_co: ...


class Gives6(
    Takes6[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, Any],
    Protocol[A0_contra, A1_contra, A2_contra, A3_contra, A4_contra, A5_contra, O_co],
):
    def _results(self) -> O_co: ...


B0 = TypeVar("B0")
B1 = TypeVar("B1")
B2 = TypeVar("B2")
B3 = TypeVar("B3")
B4 = TypeVar("B4")
B5 = TypeVar("B5")
T = TypeVar("T")
S_co = TypeVar("S_co", covariant=True)
O = TypeVar("O")
R = TypeVar("R")


class RemoteCall(Protocol[P, R_co]):
    """What ``task.remote`` is to checkers: called as the function is, a ref where a value is
    expected in the first `MAX_ARITY` places, giving ``ObjectRef[R]``. (At run time
    ``.remote`` is a plain method; mypy's plugin types it more exactly still.)"""

    def _signature(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    @overload
    def __call__(self: Takes1[B0, T], a0: ObjectRef[B0] | B0, /) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: Takes2[B0, B1, T], a0: ObjectRef[B0] | B0, a1: ObjectRef[B1] | B1, /
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: Takes3[B0, B1, B2, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: Takes4[B0, B1, B2, B3, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: Takes5[B0, B1, B2, B3, B4, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(
        self: Takes6[B0, B1, B2, B3, B4, B5, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> ObjectRef[T]: ...
    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R_co]: ...


class RemoteCallMany(Protocol[P, O_co]):
    """`RemoteCall` for tasks with several results: a call gives ``O``, a tuple of refs."""

    def _signature(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...
    def _results(self) -> O_co: ...

    @overload
    def __call__(self: Gives1[B0, O], a0: ObjectRef[B0] | B0, /) -> O: ...
    @overload
    def __call__(
        self: Gives2[B0, B1, O], a0: ObjectRef[B0] | B0, a1: ObjectRef[B1] | B1, /
    ) -> O: ...
    @overload
    def __call__(
        self: Gives3[B0, B1, B2, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: Gives4[B0, B1, B2, B3, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: Gives5[B0, B1, B2, B3, B4, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> O: ...
    @overload
    def __call__(
        self: Gives6[B0, B1, B2, B3, B4, B5, O],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> O: ...
    @overload
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> O_co: ...


class ActorCall(Protocol[S_co]):
    """What `ActorHandle.remote` is to checkers: ``h.remote(Counter.add, 5)`` calls the method
    ``add`` of the actor with its own parameters (a ref where a value is expected in the
    first `MAX_ARITY` places), an ``async def`` one too, and gives ``ObjectRef[R]``. Any
    checker types it from the method itself: no plugin, no attribute of the handle."""

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
        method: Callable[Concatenate[S_co, P], Coroutine[Any, Any, R]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> ObjectRef[R]: ...
    @overload
    def __call__(
        self, method: Callable[Concatenate[S_co, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> ObjectRef[R]: ...
