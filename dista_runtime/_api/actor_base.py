"""`Actor`: the base class that types an actor under every checker, with no plugin.

``class Counter(dista.Actor)`` is ``@dista.actor class Counter`` (``checkpoint_every`` as a
class keyword: ``class Counter(dista.Actor, checkpoint_every=100)``), and checkers see what
the decorator adds at run time: ``Counter.remote(...)`` takes the constructor's parameters
(a ref where a value is expected in the first six positional places, as for tasks:
`call_types`) and gives ``ActorHandle[Counter]``; ``Counter.options(name=...).remote(...)``
the same. A method is called through the handle with ``h.remote(Counter.add, 5)``
(`ActorHandle.remote`), typed from the method; ``h.add.remote(5)`` still works, and is typed
under mypy with the plugin (which types a subclass as it types an ``@actor`` class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from . import call_shapes as cs
from .actor import ActorHandle, actor
from .ref import ObjectRef

__all__ = ["Actor", "ActorOptions"]

P = ParamSpec("P")
Q = ParamSpec("Q")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

B0 = TypeVar("B0")
B1 = TypeVar("B1")
B2 = TypeVar("B2")
B3 = TypeVar("B3")
B4 = TypeVar("B4")
B5 = TypeVar("B5")


class ActorOptions(Protocol[P, T_co]):
    """``Counter.options(...)``: ``.remote(...)`` creates the actor with those options, and
    takes refs as ``Counter.remote`` does."""

    def _signature(self, *args: P.args, **kwargs: P.kwargs) -> T_co: ...

    @overload
    def remote(self: cs.Takes1[B0, T], a0: ObjectRef[B0] | B0, /) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Takes2[B0, B1, T], a0: ObjectRef[B0] | B0, a1: ObjectRef[B1] | B1, /
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Takes3[B0, B1, B2, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Takes4[B0, B1, B2, B3, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Takes5[B0, B1, B2, B3, B4, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Takes6[B0, B1, B2, B3, B4, B5, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Then1[B0, Q, T], a0: ObjectRef[B0] | B0, /, *args: Q.args, **kwargs: Q.kwargs
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Then2[B0, B1, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Then3[B0, B1, B2, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Then4[B0, B1, B2, B3, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
        self: cs.Then5[B0, B1, B2, B3, B4, Q, T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    def remote(
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
    ) -> ActorHandle[T]: ...
    @overload
    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ActorHandle[T_co]: ...


class Actor:
    """Subclass it to make an actor class typed under every checker (see the module)."""

    def __init_subclass__(cls, /, *, checkpoint_every: int = 0, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        actor(checkpoint_every=checkpoint_every)(cls)

    @overload
    @classmethod
    def remote(cls: Callable[[B0], T], a0: ObjectRef[B0] | B0, /) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[[B0, B1], T], a0: ObjectRef[B0] | B0, a1: ObjectRef[B1] | B1, /
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[[B0, B1, B2], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[[B0, B1, B2, B3], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[[B0, B1, B2, B3, B4], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[[B0, B1, B2, B3, B4, B5], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[Concatenate[B0, Q], T],
        a0: ObjectRef[B0] | B0,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[Concatenate[B0, B1, Q], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[Concatenate[B0, B1, B2, Q], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[Concatenate[B0, B1, B2, B3, Q], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[Concatenate[B0, B1, B2, B3, B4, Q], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(
        cls: Callable[Concatenate[B0, B1, B2, B3, B4, B5, Q], T],
        a0: ObjectRef[B0] | B0,
        a1: ObjectRef[B1] | B1,
        a2: ObjectRef[B2] | B2,
        a3: ObjectRef[B3] | B3,
        a4: ObjectRef[B4] | B4,
        a5: ObjectRef[B5] | B5,
        /,
        *args: Q.args,
        **kwargs: Q.kwargs,
    ) -> ActorHandle[T]: ...
    @overload
    @classmethod
    def remote(cls: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> ActorHandle[T]: ...
    @classmethod  # type: ignore[misc]  # mypy cannot match a Concatenate cls to *args
    def remote(cls: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # Each subclass has its own (`actor` sets it): only this base class gets here.
        raise TypeError("dista.Actor is a base class: subclass it, and create the subclass")

    @classmethod
    def options(
        cls: Callable[P, T], *, name: str | None = None, get_if_exists: bool = False
    ) -> ActorOptions[P, T]:
        """Options for one creation (``name``, ``get_if_exists``), as Ray's; each subclass
        has its own (`actor` sets it): only this base class gets here."""
        raise TypeError("dista.Actor is a base class: subclass it, and create the subclass")
