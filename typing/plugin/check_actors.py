"""Actors' public types, checked by mypy --strict with ``dista_runtime.mypy_plugin``.

As in ``check_runtime.py``: every ``assert_type`` is a claim about what users see, every
``# type: ignore[code]`` a call that must stay an error (``warn_unused_ignores`` fails the
check if it stops being one). Importing this module runs nothing that needs a cluster: the
classes are only decorated, and the calls sit in functions nobody calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, assert_type, overload

import dista_runtime as dista
from dista_runtime import ActorHandle, ActorMethod, ObjectRef, actor

T = TypeVar("T")


@dista.actor
class Counter:
    limit = 100  # a class attribute, not a method

    def __init__(self, start: int = 0, *, step: int = 1) -> None:
        self.value = start
        self.step = step

    def add(self, k: int) -> int:
        self.value += k * self.step
        return self.value

    async def aget(self) -> int:
        return self.value

    def describe(self, prefix: str, *rest: str, sep: str = " ") -> str:
        return sep.join([prefix, *rest, str(self.value)])

    def fill(self, values: list[int]) -> None:
        self.value = sum(values)

    def reset(self) -> None:
        self.value = 0

    @staticmethod
    def version() -> str:
        return "1"

    @classmethod
    def kind(cls, upper: bool) -> str:
        return "counter".upper() if upper else "counter"

    def echo(self, x: T) -> T:
        return x

    @overload
    def pick(self, x: int) -> int: ...
    @overload
    def pick(self, x: str) -> str: ...
    def pick(self, x: int | str) -> int | str:
        return x

    @property
    def doubled(self) -> int:
        return 2 * self.value

    def _private(self) -> None:
        pass


@actor(checkpoint_every=10)
class Box(Generic[T]):
    def __init__(self, item: T) -> None:
        self.item = item

    def get(self) -> T:
        return self.item

    def put(self, item: T) -> None:
        self.item = item


@dista.actor
class Pair:
    def __init__(self, a: int, b: str) -> None:
        self.a, self.b = a, b


@dista.actor()
class Empty:
    pass


class Plain:
    """Not an actor: it has no ``remote``."""

    def add(self, k: int) -> int:
        return k


@dista.task
def use(h: dista.ActorHandle[Counter]) -> int:
    return 0


def check_create(r: ObjectRef[int], s: ObjectRef[str]) -> None:
    # Cls.remote takes the constructor's parameters, refs allowed where values are expected.
    assert_type(Counter.remote(), ActorHandle[Counter])
    assert_type(Counter.remote(10), ActorHandle[Counter])
    assert_type(Counter.remote(r), ActorHandle[Counter])
    assert_type(Counter.remote(start=r, step=2), ActorHandle[Counter])
    assert_type(Counter.remote(1, step=r), ActorHandle[Counter])
    assert_type(Box.remote(1), ActorHandle[Box[int]])
    assert_type(Box.remote(s), ActorHandle[Box[str]])  # a ref of T stands for a T
    assert_type(Empty.remote(), ActorHandle[Empty])
    assert_type(Pair.remote(r, b=s), ActorHandle[Pair])
    # The class is still the class: a local instance, and a type.
    assert_type(Counter(1), Counter)
    assert_type(Counter(1).add(2), int)
    handle: ActorHandle[Counter] = Counter.remote()
    assert_type(handle, ActorHandle[Counter])

    # What must stay an error.
    Counter.remote("x")  # type: ignore[arg-type]
    Counter.remote(s)  # type: ignore[arg-type]  # a ref of the wrong type
    Counter.remote(1, 2)  # type: ignore[call-arg]  # step is keyword-only: too many
    Counter.remote(1, stop=2)  # type: ignore[call-arg]  # unknown keyword
    Box.remote()  # type: ignore[call-overload]  # missing argument (generic: overloads)
    Pair.remote(1)  # type: ignore[call-arg]  # missing argument
    Pair.remote(1, "a", 2)  # type: ignore[call-arg]  # too many
    Empty.remote(1)  # type: ignore[call-arg]
    Plain.remote()  # type: ignore[attr-defined]  # not an actor
    wrong: ActorHandle[Box[str]] = Box.remote(1)  # type: ignore[arg-type]
    del wrong


def check_methods(
    h: ActorHandle[Counter],
    r: ObjectRef[int],
    s: ObjectRef[str],
    refs: list[ObjectRef[int]],
    bools: list[bool],
) -> None:
    # handle.method is an ActorMethod of the method's parameters (without self) and result.
    method: ActorMethod[[int], int] = h.add
    del method
    assert_type(h.add.remote(1), ObjectRef[int])
    assert_type(h.add.remote(r), ObjectRef[int])  # a ref where a value is expected
    assert_type(h.add.remote(k=r), ObjectRef[int])
    assert_type(h.add.remote(h.add.remote(1)), ObjectRef[int])  # a chain
    assert_type(h.aget.remote(), ObjectRef[int])  # async def: the awaited type
    assert_type(h.describe.remote("a", s, "c", sep=s), ObjectRef[str])
    assert_type(h.fill.remote([r, 2]), ObjectRef[None])  # refs nested, as for tasks
    assert_type(h.fill.remote(refs), ObjectRef[None])
    assert_type(h.reset.remote(), ObjectRef[None])
    assert_type(h.version.remote(), ObjectRef[str])  # staticmethod
    assert_type(h.kind.remote(True), ObjectRef[str])  # classmethod
    assert_type(h.echo.remote(b""), ObjectRef[bytes])  # a generic method
    assert_type(h.echo.remote(r), ObjectRef[int])
    assert_type(h.pick, ActorMethod[..., Any])  # overloaded: not typed
    assert_type(h.pick.remote(1.5), ObjectRef[Any])
    assert_type(h.actor_id, int)  # the handle's own attribute
    assert_type(use.remote(h), ObjectRef[int])  # a handle passed to a task
    bound: Callable[[int], ObjectRef[int]] = h.add.remote
    del bound

    # What must stay an error.
    h.add.remote("x")  # type: ignore[arg-type]
    h.add.remote(s)  # type: ignore[arg-type]  # a ref of the wrong type
    h.add.remote(1, 2)  # type: ignore[call-arg]  # too many
    h.add.remote()  # type: ignore[call-arg]  # missing
    h.add.remote(j=1)  # type: ignore[call-arg]  # unknown keyword
    h.aget.remote(1)  # type: ignore[call-arg]
    h.describe.remote("a", 1)  # type: ignore[arg-type]
    h.fill.remote((r, 2))  # type: ignore[arg-type]  # a tuple is no list
    h.fill.remote(bools)  # type: ignore[arg-type]  # a list[bool] is no list[int]
    h.fill.remote([s])  # type: ignore[list-item]
    h.ad.remote(1)  # type: ignore[attr-defined]  # no such method
    h._private.remote()  # type: ignore[attr-defined]  # private: not callable remotely
    h.doubled.remote()  # type: ignore[attr-defined]  # a property
    h.limit.remote()  # type: ignore[attr-defined]  # a class attribute
    h.value.remote()  # type: ignore[attr-defined]  # an instance attribute
    h.add(1)  # type: ignore[operator]  # a method is called through .remote
    use.remote(Box.remote(1))  # type: ignore[arg-type]


def check_generic(b: ActorHandle[Box[int]], r: ObjectRef[int]) -> None:
    assert_type(b.get.remote(), ObjectRef[int])
    assert_type(b.put.remote(r), ObjectRef[None])
    b.put.remote("x")  # type: ignore[arg-type]


def check_handle(h: ActorHandle[Counter]) -> None:
    assert_type(h.checkpoint(), None)
    assert_type(h.checkpoint(timeout=5.0), None)
    assert_type(h.kill(), None)
    h.checkpoint("soon")  # type: ignore[arg-type]


async def check_await(h: ActorHandle[Counter]) -> None:
    assert_type(await h, ActorHandle[Counter])
    assert_type(await h.checkpoint_async(), None)
    assert_type(await h.checkpoint_async(1.0), None)
    assert_type(await h.add.remote(1), int)


def check_untyped(h: ActorHandle[Any], a: Any) -> None:
    # A handle of unknown type: every attribute is a method of unknown parameters.
    assert_type(h.anything, ActorMethod[..., Any])
    assert_type(h.anything.remote(1, x=a), ObjectRef[Any])


def check_reserved() -> None:
    # A class that defines what handles use themselves: a TypeError at run time, an error here.
    @dista.actor
    class Clash:  # type: ignore[misc]
        def kill(self) -> None:
            pass

    del Clash


def check_named(r: ObjectRef[int]) -> None:
    # Cls.options(name=...).remote(...) is Cls.remote(...) with a name; get_actor is typed by
    # the class it is given, untyped without one.
    assert_type(Counter.options(name="c").remote(r, step=2), ActorHandle[Counter])
    assert_type(Counter.options(name="c", get_if_exists=True).remote(), ActorHandle[Counter])
    assert_type(dista.get_actor("c", Counter), ActorHandle[Counter])
    assert_type(dista.get_actor("c", Counter).add.remote(r), ObjectRef[int])
    assert_type(dista.get_actor("c", timeout=1.0), ActorHandle[Any])
    assert_type(dista.get_actor("c").anything.remote(1), ObjectRef[Any])
    Counter.options(name="c").remote("x")  # type: ignore[arg-type]
    Counter.options(nam="c")  # type: ignore[call-arg]
    dista.get_actor("c", Counter).ad.remote(1)  # type: ignore[attr-defined]
    dista.get_actor(1)  # type: ignore[call-overload]
