"""`ObjectRef[T]`: a handle to a task's result, living on a worker or in the head.

A ref holds the driver's reference: when the last Python reference to it goes away (or
`release` is called) the head hears a release and frees the object once no task needs it.
Reading it blocks (`get`), awaits (`await ref`), or waits with others (`dista.wait`).

A task's ref can be cancelled; an actor call's cannot: an actor runs its calls one at a time
in the order they were made, and a checkpoint may already include a call, so taking one out
would break the one order in which every call is applied exactly once.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from .._session.session import Session

__all__ = ["ObjectRef", "value_of"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class ObjectRef(Generic[T_co]):
    """The result of ``task.remote(...)``: an object that exists, or will, in the cluster."""

    __slots__ = ("__weakref__", "_call", "_keep", "_released", "_session", "object_id")

    def __init__(self, object_id: int, session: Session, *, actor_call: bool = False) -> None:
        self.object_id: int = object_id
        self._session = session
        self._released = False
        #: The result of an actor call, which cannot be cancelled (the module docstring).
        self._call = actor_call
        #: What this ref keeps alive: the actor handles passed to its task.
        self._keep: tuple[object, ...] = ()

    def __repr__(self) -> str:
        return f"ObjectRef({self.object_id:#x})"

    def __hash__(self) -> int:
        return hash(self.object_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectRef) and other.object_id == self.object_id

    def get(self, timeout: float | None = None) -> T_co:
        """The value, once it exists; raises `TaskError` if its task failed.

        ``timeout`` in seconds raises `GetTimeoutError` when it passes (None waits as long
        as the cluster is up).
        """
        self._check()
        value: T_co = self._session.get_value(self.object_id, timeout)
        return value

    def __await__(self) -> Generator[Any, None, T_co]:
        self._check()
        # A cancelled await may cancel the task too (``cancel_remote``); never an actor call.
        awaiting = self._session.await_value(self.object_id, cancellable=not self._call)
        value: T_co = yield from awaiting.__await__()
        return value

    def done(self) -> bool:
        """Whether the value (or its failure) has reached this driver's head connection."""
        return self._session.is_done(self.object_id)

    def cancel(self, force: bool = False) -> None:
        """Ask the head to cancel the task behind this ref; reading it then raises
        `TaskCancelledError`. A task that has not started never runs; a running one is
        interrupted (KeyboardInterrupt in its thread, at its next Python instruction).
        ``force`` also ends the worker process running it (a supervisor replaces it): for
        a task stuck in C code that an interrupt cannot reach.

        An actor call's ref raises `ValueError` (as Ray does for what it cannot cancel of
        an actor's): kill the actor to stop its calls."""
        if self._call:
            raise ValueError(
                f"{self!r} is an actor call, which cannot be cancelled: an actor runs its "
                "calls one at a time in the order they were made, and a checkpoint may "
                "already include this one, so cancelling it would break that order. To stop "
                "the actor's calls, kill the actor (handle.kill(); force=True also ends its "
                "worker process)"
            )
        self._check()
        self._session.cancel(self.object_id, force)

    def release(self) -> None:
        """Give up this driver's reference now; the ref is unusable afterwards."""
        if not self._released:
            self._released = True
            self._session.release(self.object_id)

    def _check(self) -> None:
        if self._released:
            raise ValueError(f"{self!r} was released; it can no longer be read")

    def __del__(self) -> None:
        if not self._released:
            self._released = True
            try:
                self._session.release(self.object_id)
            except Exception:
                pass  # interpreter shutdown: the head frees everything when we disconnect

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError(
            f"{self!r} cannot be pickled on its own: pass refs as task arguments (at any "
            "depth) and the task receives their values; do not return refs from tasks"
        )


def value_of(ref: ObjectRef[T]) -> T:
    """``ref``, typed as its value: for a ref where a checker cannot see that a ref is taken.

    A task or actor call receives the value of each ref among its arguments, at any depth;
    checkers without Dista's mypy plugin see that only in the first six positional places.
    Elsewhere (a keyword, a list) ``add.remote(1, b=dista.value_of(ref))`` says it: the
    checker still checks the ref's own type (an ``ObjectRef[str]`` given for an ``int`` is an
    error), and at run time this returns the ref itself, which the call reads as usual."""
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"value_of takes an ObjectRef, not {type(ref).__name__}")
    value: T = ref  # type: ignore[assignment]  # the ref stands for its value in a call
    return value
