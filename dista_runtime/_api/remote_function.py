"""The typed faces of a task: `RemoteFunction` (one result) to `RemoteFunction6`, and
`RemoteFunctionN`.

``.remote`` takes the function's own parameters, and a ref wherever a value is expected in
the first six positional places: see `call_types` for how, with no plugin, under pyright
and mypy alike. The part that runs is `remote_base.Remote`.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    ParamSpec,
    Protocol,
    Self,
    TypeVar,
    overload,
)

from . import call_types as ct
from .ref import ObjectRef
from .remote_base import KEEP, Keep, Remote, make_ref

__all__ = [
    "RemoteFunction",
    "RemoteFunction2",
    "RemoteFunction3",
    "RemoteFunction4",
    "RemoteFunction5",
    "RemoteFunction6",
    "RemoteFunctionN",
]

P = ParamSpec("P")
R = TypeVar("R")
R1 = TypeVar("R1")
R2 = TypeVar("R2")
R3 = TypeVar("R3")
R4 = TypeVar("R4")
R5 = TypeVar("R5")
R6 = TypeVar("R6")


class RemoteFunction(Remote, Generic[P, R]):
    """A task with one result."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        result: R = self._fn(*args, **kwargs)
        return result

    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[1] | None = None,
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction[P, R]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[2],
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction2[P, Any, Any]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[3],
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction3[P, Any, Any, Any]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[4],
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction4[P, Any, Any, Any, Any]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[5],
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction5[P, Any, Any, Any, Any, Any]: ...
    @overload
    def options(  # type: ignore[overload-overlap]
        self,
        *,
        num_returns: Literal[6],
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunction6[P, Any, Any, Any, Any, Any, Any]: ...
    @overload
    def options(
        self, *, num_returns: int, max_retries: int | Keep | None = KEEP, name: str | None = None
    ) -> RemoteFunctionN[P]: ...
    def options(
        self,
        *,
        num_returns: int | None = None,
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> Any:
        """This task with other options for the calls made through what it returns, as
        Ray's ``f.options(...)``: ``num_returns`` (its function must then return that many
        values), ``max_retries`` (None: the head's default), ``name`` (what the timeline
        calls these calls). ``f.options(name="load").remote(x)``; ``f`` itself is unchanged."""
        return reoptioned(self, num_returns, max_retries, name)

    if TYPE_CHECKING:  # to checkers, a callable typed per number of arguments (call_types)

        @property
        def remote(self) -> ct.RemoteCall[P, R]: ...
    else:

        def remote(self, *args, **kwargs):
            oid, s, kept = self._submit(args, kwargs)
            return make_ref(oid, s, kept)


class _Calls(Protocol[P]):
    """Anything called with ``P``: a task's own parameters, for `_Many.options`."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...


class _Many(Remote):
    """A task with several results: ``.remote`` gives a tuple of ``num_returns`` refs."""

    @overload
    def options(
        self,
        *,
        num_returns: None = None,
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> Self: ...
    @overload
    def options(
        self: _Calls[P],
        *,
        num_returns: int,
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> RemoteFunctionN[P]: ...
    def options(
        self,
        *,
        num_returns: int | None = None,
        max_retries: int | Keep | None = KEEP,
        name: str | None = None,
    ) -> Any:
        """As `RemoteFunction.options`: without ``num_returns``, the number of results is
        kept (and so is the type); with it, the task is typed `RemoteFunctionN`."""
        return reoptioned(self, num_returns, max_retries, name)

    if not TYPE_CHECKING:  # each kind declares its own (call_types.RemoteCallMany)

        def remote(self, *args, **kwargs):
            oid, s, kept = self._submit(args, kwargs)
            return tuple(make_ref(oid + i, s, kept) for i in range(self.num_returns))


class RemoteFunction2(_Many, Generic[P, R1, R2]):
    """A task with 2 results (``num_returns=2``): ``.remote`` gives a tuple of 2 refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2]:
        result: tuple[R1, R2] = self._fn(*args, **kwargs)
        return result

    if TYPE_CHECKING:

        @property
        def remote(self) -> ct.RemoteCallMany[P, tuple[ObjectRef[R1], ObjectRef[R2]]]: ...


class RemoteFunction3(_Many, Generic[P, R1, R2, R3]):
    """A task with 3 results (``num_returns=3``): ``.remote`` gives a tuple of 3 refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2, R3]:
        result: tuple[R1, R2, R3] = self._fn(*args, **kwargs)
        return result

    if TYPE_CHECKING:

        @property
        def remote(
            self,
        ) -> ct.RemoteCallMany[P, tuple[ObjectRef[R1], ObjectRef[R2], ObjectRef[R3]]]: ...


class RemoteFunction4(_Many, Generic[P, R1, R2, R3, R4]):
    """A task with 4 results (``num_returns=4``): ``.remote`` gives a tuple of 4 refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2, R3, R4]:
        result: tuple[R1, R2, R3, R4] = self._fn(*args, **kwargs)
        return result

    if TYPE_CHECKING:

        @property
        def remote(
            self,
        ) -> ct.RemoteCallMany[
            P, tuple[ObjectRef[R1], ObjectRef[R2], ObjectRef[R3], ObjectRef[R4]]
        ]: ...


class RemoteFunction5(_Many, Generic[P, R1, R2, R3, R4, R5]):
    """A task with 5 results (``num_returns=5``): ``.remote`` gives a tuple of 5 refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2, R3, R4, R5]:
        result: tuple[R1, R2, R3, R4, R5] = self._fn(*args, **kwargs)
        return result

    if TYPE_CHECKING:

        @property
        def remote(
            self,
        ) -> ct.RemoteCallMany[
            P, tuple[ObjectRef[R1], ObjectRef[R2], ObjectRef[R3], ObjectRef[R4], ObjectRef[R5]]
        ]: ...


class RemoteFunction6(_Many, Generic[P, R1, R2, R3, R4, R5, R6]):
    """A task with 6 results (``num_returns=6``): ``.remote`` gives a tuple of 6 refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[R1, R2, R3, R4, R5, R6]:
        result: tuple[R1, R2, R3, R4, R5, R6] = self._fn(*args, **kwargs)
        return result

    if TYPE_CHECKING:

        @property
        def remote(
            self,
        ) -> ct.RemoteCallMany[
            P,
            tuple[
                ObjectRef[R1],
                ObjectRef[R2],
                ObjectRef[R3],
                ObjectRef[R4],
                ObjectRef[R5],
                ObjectRef[R6],
            ],
        ]: ...


class RemoteFunctionN(_Many, Generic[P]):
    """A task with ``num_returns`` results, typed as a tuple of refs."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]:
        result: tuple[Any, ...] = self._fn(*args, **kwargs)
        return result

    if TYPE_CHECKING:

        @property
        def remote(self) -> ct.RemoteCallMany[P, tuple[ObjectRef[Any], ...]]: ...


_KINDS: dict[int, type[Remote]] = {
    1: RemoteFunction,
    2: RemoteFunction2,
    3: RemoteFunction3,
    4: RemoteFunction4,
    5: RemoteFunction5,
    6: RemoteFunction6,
}


def reoptioned(
    fn: Remote, num_returns: int | None, max_retries: int | Keep | None, name: str | None
) -> Any:
    """A copy of ``fn`` with other options (`options`): ``fn`` is left as it is."""
    retries = fn.max_retries if isinstance(max_retries, Keep) else max_retries
    returns = fn.num_returns if num_returns is None else num_returns
    made: Remote = remote_function(fn._fn, returns, retries)
    made.label = fn.label if name is None else name
    return made


def remote_function(fn: Any, num_returns: int, max_retries: int | None) -> Any:
    """The `RemoteFunction` kind for ``num_returns`` results, around ``fn``."""
    return _KINDS.get(num_returns, RemoteFunctionN)(fn, num_returns, max_retries)
