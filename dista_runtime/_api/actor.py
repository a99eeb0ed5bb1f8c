"""``@actor``: a class whose one instance lives on a worker; its methods run there, in order.

``Counter.remote(...)`` creates the instance on a worker (which then runs nothing else) and
returns an `ActorHandle[Counter]` at once; ``h.add.remote(1)`` queues a call and returns an
`ObjectRef` of its result. Calls from one caller run in the order it made them, one at a
time; an exception fails that call only. ``async def`` methods run on the worker's loop,
still one call at a time. A handle pickles: pass it to tasks and other actors and call it
from there. When the driver that made an actor drops its last handle, the actor is killed
(as Ray does for actors that are not detached); ``h.kill()`` does it at once.

``@actor(checkpoint_every=n)`` has the worker write the actor's state to
``DISTA_CHECKPOINT_URI`` every n calls (``h.checkpoint()`` at any time): when its worker
dies, the actor comes back on another worker from its newest checkpoint, and the calls that
checkpoint does not include run again, so its state is as if each call ran once, and each
call's answer reaches its caller once. State is what ``__getstate__`` gives (pickle's rules:
the instance's ``__dict__`` by default) and ``__setstate__`` takes back.

Refs among a call's arguments are read by the caller first (in order: a call waits for
its refs, and calls after it wait behind it), then sent with the call; the actor gets values.

Typing: with the mypy plugin (``dista_runtime.mypy_plugin``), ``Counter.remote`` takes the
constructor's parameters and ``h.add`` is an `ActorMethod` with the method's parameters,
refs allowed where values are expected. Without it, ``h.add.remote`` is untyped (``Any``).
"""

from __future__ import annotations

import secrets
import struct
import warnings
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Final, Generic, ParamSpec, TypeVar, overload

from dista_proto import ACTOR_CAPABILITY_SIZE
from dista_proto.frame import MAX_ACTOR_NAME

from .._session import context as _context
from .._values import names
from .._values.codec import encode_call, encode_call_carrying, note_carried
from .._values.ids import method_id, name_hash
from .._values.registry import (
    ACTOR_BY_VALUE_ID,
    by_value_argument,
    importable,
    label_actor_calls,
    lookup,
    method_table,
    pickle_function,
    register_actor,
)
from .arity import method_arities
from .call_types import ActorCall
from .ref import ObjectRef

if TYPE_CHECKING:
    from .._session.session import Session

__all__ = [
    "ACTOR_BY_VALUE_ID",
    "ActorHandle",
    "ActorMethod",
    "ActorType",
    "CheckpointWarning",
    "actor",
    "get_actor",
]

T = TypeVar("T")
#: A handle to a subclass's actor is a handle to its base class's.
T_co = TypeVar("T_co", covariant=True)
P = ParamSpec("P")
R = TypeVar("R")
#: The class itself, as its checker types it (a `dista.Actor` subclass keeps its typed
#: ``remote`` through ``dista.actor(Cls)``, which ``type[T]`` would lose under mypy).
C = TypeVar("C", bound=type)

#: A lookup's answer: the actor's ID, its type ID, its capability (Dista's actor-lookup).
_LOOKUP_ANSWER: Final = struct.Struct(f"<QQ{ACTOR_CAPABILITY_SIZE}s")
_RESERVED: Final = frozenset({"remote", "options", "checkpoint", "checkpoint_async", "kill"})


#: Each actor class defined in this process, by its type name (handles check calls with it).
_DEFINED: dict[str, ActorType] = {}


class CheckpointWarning(UserWarning):
    """An actor's checkpoint could not be written; the actor goes on without it."""


class ActorType:
    """What `actor` knows of a class: its name, IDs, methods and checkpoint cadence."""

    def __init__(self, cls: type, checkpoint_every: int) -> None:
        if not isinstance(checkpoint_every, int) or isinstance(checkpoint_every, bool):
            raise TypeError(f"checkpoint_every must be an int, not {checkpoint_every!r}")
        if checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be 0 (never) or more, not {checkpoint_every}")
        clash = {
            name
            for name in _RESERVED & set(vars(cls))
            if not isinstance(vars(cls)[name], _Create | _Options)  # ours: decorated again
        }
        if clash:
            raise TypeError(
                f"actor class {cls.__qualname__} defines {sorted(clash)}, which actor handles "
                "use themselves: rename them"
            )
        self.cls = cls
        self.checkpoint_every = checkpoint_every
        self.name = f"{cls.__module__}:{cls.__qualname__}"
        self.importable = importable(cls)
        self.type_id = name_hash(self.name)
        self.methods = {k: v for k, v in method_table(cls).items() if k not in _RESERVED}
        arities = method_arities(cls)
        self.arities = {k: arities[k] for k in arities if k not in _RESERVED}
        _DEFINED[self.name] = self
        self._pickled: tuple[bytes, bytes] | None = None
        if self.importable:
            register_actor(self.name, cls)
        label_actor_calls(self.type_id, cls)  # the timeline names its calls

    def create(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], name: str = ""
    ) -> ActorHandle[Any]:
        self.arities["__init__"].check(args, kwargs)  # before anything is sent
        context = _context.session()
        argument, inputs = encode_call(args, kwargs, ObjectRef, self.name)
        prefix = b""
        if self.name in context.names:
            type_id = self.type_id
        else:
            # Workers cannot import it: the class travels in front of the argument.
            if self._pickled is None:
                self._pickled = pickle_function(self.cls)
            digest, data = self._pickled
            prefix = by_value_argument(digest, data, b"")
            type_id = ACTOR_BY_VALUE_ID
        session = context.session
        every = self.checkpoint_every
        # The actor's capability: only this driver and holders of a handle (which carries
        # it) may call or kill the actor; its ID alone is guessable.
        capability = secrets.token_bytes(ACTOR_CAPABILITY_SIZE)
        actor_id = session.actors.create_actor(
            type_id, argument, inputs, every, prefix, capability, name
        )
        if prefix:  # by value: its type ID names no class, its ID does (for people)
            names.add(actor_id, names.label_of(self.cls))
        return ActorHandle(actor_id, self.name, self.methods, session, True, capability)


class _Create(Generic[T]):
    """``Cls.remote``: create the actor on a worker."""

    def __init__(self, actor_type: ActorType, name: str = "", get_if_exists: bool = False) -> None:
        self._type = actor_type
        self._name = name
        self._get_if_exists = get_if_exists

    def __call__(self, *args: Any, **kwargs: Any) -> ActorHandle[T]:
        if not self._name:
            return self._type.create(args, kwargs)
        if self._get_if_exists:
            try:
                return get_actor(self._name, self._type.cls)
            except ValueError:
                pass  # none yet: create it (one created meanwhile wins: looked up then)
        try:
            return self._type.create(args, kwargs, self._name)
        except ValueError:
            if not self._get_if_exists:
                raise
        return get_actor(self._name, self._type.cls)


class _Configured(Generic[T]):
    """``Cls.options(...)``: ``.remote(...)`` creates the actor with those options."""

    def __init__(self, actor_type: ActorType, name: str, get_if_exists: bool) -> None:
        self.remote: _Create[T] = _Create(actor_type, name, get_if_exists)


class _Options(Generic[T]):
    """``Cls.options``: options for one creation (``name``, ``get_if_exists``), as Ray's."""

    def __init__(self, actor_type: ActorType) -> None:
        self._type = actor_type

    def __call__(self, *, name: str | None = None, get_if_exists: bool = False) -> _Configured[T]:
        if name is not None:
            check_name(name)
        elif get_if_exists:
            raise ValueError("get_if_exists=True needs a name")
        return _Configured(self._type, name or "", get_if_exists)


def check_name(name: object) -> None:
    """`ValueError` (`TypeError`) unless ``name`` may name an actor."""
    if not isinstance(name, str):
        raise TypeError(f"an actor name is a str, not {type(name).__name__}")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"actor name {name!r} is not valid UTF-8") from None
    if not 1 <= size <= MAX_ACTOR_NAME:
        raise ValueError(f"an actor name is 1 to {MAX_ACTOR_NAME} bytes of UTF-8, not {size}")


@overload
def get_actor(name: str, /, *, timeout: float | None = None) -> ActorHandle[Any]: ...
@overload
def get_actor(name: str, cls: type[T], /, *, timeout: float | None = None) -> ActorHandle[T]: ...
def get_actor(
    name: str, cls: type[Any] | None = None, /, *, timeout: float | None = None
) -> ActorHandle[Any]:
    """The handle of the live actor named ``name`` (``Cls.options(name=...).remote()``),
    from any driver of the cluster: `ValueError` if there is none. ``cls`` types it
    (``ActorHandle[Cls]``, with the class's methods); without it any public name is a method.
    The handle keeps the actor alive, as its creator's do, until the last one goes."""
    check_name(name)
    session = _context.session().session
    answer = session.actors.lookup_actor(name, timeout)
    actor_id, type_id, capability = _LOOKUP_ANSWER.unpack(answer)
    actor_type = getattr(cls if cls is not None else lookup(type_id), "__dista_actor__", None)
    if isinstance(actor_type, ActorType):
        type_name, methods = actor_type.name, actor_type.methods
    else:
        type_name, methods = f"<actor {name!r}>", {}
    handle: ActorHandle[Any] = ActorHandle(actor_id, type_name, methods, session, True, capability)
    handle._any_method = actor_type is None
    return handle


@overload
def actor(cls: C, /) -> C: ...
@overload
def actor(*, checkpoint_every: int = 0) -> Callable[[type[T]], type[T]]: ...
def actor(
    cls: type[T] | None = None, /, *, checkpoint_every: int = 0
) -> type[T] | Callable[[type[T]], type[T]]:
    """Make ``cls`` an actor class: ``@actor`` or ``@actor(checkpoint_every=100)``.

    The class is returned as it is, with ``remote`` added: ``Cls(...)`` still makes a local
    instance, ``Cls.remote(...)`` one on a worker.
    """

    def make(cls: type[T]) -> type[T]:
        if not isinstance(cls, type):
            raise TypeError(f"@dista.actor decorates a class, not {type(cls).__name__}")
        actor_type = ActorType(cls, checkpoint_every)
        cls.__dista_actor__ = actor_type  # type: ignore[attr-defined]
        cls.remote = _Create(actor_type)  # type: ignore[attr-defined]
        cls.options = _Options(actor_type)  # type: ignore[attr-defined]
        return cls

    return make if cls is None else make(cls)


class ActorMethod(Generic[P, R]):
    """``handle.method``: ``.remote(...)`` queues a call and gives its result's ref."""

    __slots__ = ("_handle", "_id", "_name")

    def __init__(self, handle: ActorHandle[Any], name: str, method: int) -> None:
        self._handle = handle
        self._name = name
        self._id = method

    def remote(self, *args: P.args, **kwargs: P.kwargs) -> ObjectRef[R]:
        handle = self._handle
        known = _DEFINED.get(handle._type_name)
        if known is not None:  # the class is known here: a call that cannot bind fails now
            checked = known.arities.get(self._name)
            if checked is not None:
                checked.check(args, kwargs)
        session = handle._bound()
        what = f"{handle._type_name.rpartition(':')[2]}.{self._name}"
        argument, inputs, handles = encode_call_carrying(args, kwargs, ObjectRef, what)
        oid = session.actors.call_actor(
            handle.actor_id, self._id, argument, inputs, handle._capability
        )
        handle._warn(session)
        ref: ObjectRef[R] = ObjectRef(oid, session, actor_call=True)  # cannot be cancelled
        if handles:
            ref._keep = handles
        return ref

    if not TYPE_CHECKING:  # calling one stays a type error; at run time it says what to do

        def __call__(self, *args, **kwargs):
            raise TypeError(
                f"actor methods are called with .remote(): {self._name}.remote(...) gives "
                "a ref to the result"
            )

    def __repr__(self) -> str:
        return f"<dista actor method {self._handle._type_name}.{self._name}>"


class ActorHandle(Generic[T_co]):
    """A handle to an actor of type ``T``: ``handle.method.remote(...)``, `checkpoint`,
    `kill`. It pickles, so tasks and other actors can call the actor too: the pickle
    carries the actor's capability, which the head asks of anyone but its creator (so treat
    a pickled handle as the key to the actor)."""

    __slots__ = (
        "__weakref__",
        "_any_method",
        "_capability",
        "_methods",
        "_owner",
        "_session",
        "_type_name",
        "actor_id",
    )

    def __init__(
        self,
        actor_id: int,
        type_name: str,
        methods: dict[str, tuple[int, bool]],
        session: Session | None,
        owner: bool = False,
        capability: bytes = b"",
    ) -> None:
        self.actor_id: int = actor_id
        self._any_method = False  # looked up without its class: any public name is a method
        self._capability = capability
        self._type_name = type_name
        self._methods = methods
        self._session = session
        # The handles the creating driver holds keep the actor alive: the last one to go
        # kills it. Copies elsewhere (in tasks, other drivers) do not.
        self._owner = owner and session is not None
        if self._owner:
            assert session is not None
            session.actors.hold_actor(actor_id)

    def __getattr__(self, name: str) -> ActorMethod[..., Any]:
        found = self._methods.get(name) if not name.startswith("_") else None
        if found is None and self._any_method and not name.startswith("_"):
            found = (method_id(name), False)
        if found is None:
            raise AttributeError(
                f"actor {self._type_name} has no method {name!r} (its methods: "
                f"{', '.join(sorted(self._methods)) or 'none'})"
            )
        return ActorMethod(self, name, found[0])

    if TYPE_CHECKING:  # to checkers, typed from the method itself (call_types.ActorCall)

        @property
        def remote(self) -> ActorCall[T_co]: ...
    else:

        def remote(self, method, /, *args, **kwargs):
            """``h.remote(Counter.add, 5)``: ``h.add.remote(5)``, typed under any checker."""
            name = getattr(method, "__name__", None)
            known = _DEFINED.get(self._type_name)
            if not isinstance(name, str) or not callable(method):
                mine = f"{known.cls.__qualname__}.method" if known else "Counter.add"
                raise TypeError(
                    f"h.remote takes a method of the actor's class ({mine}), not {method!r}"
                )
            if known is not None and getattr(known.cls, name, None) != method:
                # A same-named method of another class would otherwise run this one's.
                what = getattr(method, "__qualname__", name)
                raise TypeError(
                    f"h.remote({what}): not a method of actor {known.cls.__qualname__} "
                    f"(its methods: {', '.join(sorted(self._methods)) or 'none'})"
                )
            return self.__getattr__(name).remote(*args, **kwargs)

    def _bound(self) -> Session:
        """The session calls go through: the creator's, or this process's (a task's)."""
        session = self._session
        if session is None or session.closed:
            session = self._session = _context.session().session
        return session

    def _warn(self, session: Session) -> None:
        message = session.actors.actor_warning(self.actor_id)
        if message is not None:
            warnings.warn(CheckpointWarning(message), stacklevel=3)

    def checkpoint(self, timeout: float | None = None) -> None:
        """Write the actor's state now, after the calls made so far; raises `DistaError`
        saying why if it could not be written (no ``DISTA_CHECKPOINT_URI``, a full disk)."""
        session = self._bound()
        session.actors.checkpoint_actor(self.actor_id, self._capability, timeout)

    async def checkpoint_async(self, timeout: float | None = None) -> None:
        """`checkpoint`, awaited on whatever loop runs the caller."""
        session = self._bound()
        await session.actors.checkpoint_actor_async(self.actor_id, self._capability, timeout)

    def kill(self, force: bool = False) -> None:
        """Destroy the actor now: calls it has not run fail; its checkpoints are removed.
        ``force`` also ends the worker process hosting it (a supervisor starts a new one),
        for a method stuck in C code that nothing else stops."""
        session = self._bound()
        session.actors.kill_actor(self.actor_id, self._capability, force)

    def __repr__(self) -> str:
        return f"ActorHandle({self._type_name}, {self.actor_id:#x})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorHandle) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)

    def __reduce__(self) -> tuple[object, ...]:
        note_carried(self)  # the call being encoded keeps this actor (`encode_call_carrying`)
        return (_rebuild, (self.actor_id, self._type_name, self._methods, self._capability))

    def __del__(self) -> None:
        if self._owner:
            self._owner = False
            session = self._session
            if session is not None:
                try:
                    session.actors.drop_actor(self.actor_id)
                except Exception:
                    pass  # interpreter shutdown: the head ends its actors when we leave

    def __await__(self) -> Generator[Any, None, ActorHandle[T_co]]:
        """``await handle``: once the actor exists (raises the constructor's error)."""
        yield from self._bound().actors.await_actor(self.actor_id).__await__()
        return self


def _rebuild(
    actor_id: int,
    type_name: str,
    methods: dict[str, tuple[int, bool]],
    capability: bytes = b"",
) -> ActorHandle[Any]:
    context = _context.current()
    session = context.session if context is not None else None
    return ActorHandle(actor_id, type_name, methods, session, False, capability)
