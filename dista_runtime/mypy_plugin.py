"""A mypy plugin: ``task.remote`` takes a ref wherever it takes a value.

``add.remote(ref, 3)`` runs ``add(ref.get(), 3)`` on a worker, but ``.remote`` is typed with
the function's own ``ParamSpec``, which cannot say "each parameter may also be an
`ObjectRef` of its type". This plugin says it: for calls of ``.remote`` on the four
``RemoteFunction`` classes it rewrites each parameter ``a: T`` to ``a: T | ObjectRef[T]``
(for ``*args: T`` and ``**kwargs: T`` the element type), keeping names, kinds and defaults,
so missing, extra and mistyped arguments are still errors, and so is a ref of the wrong
type. ``Any`` parameters stay ``Any``.

Refs nested in the common containers are widened too, two levels deep (`_widen`): for
``xs: list[int]``, ``total.remote([ref, 3])`` is fine, as at run time, where the worker
replaces refs at any depth. ``list``, ``set`` and ``dict`` are invariant, so the signature
takes their covariant reading (``Sequence[int | ObjectRef[int]]``: a literal ``[ref, 3]`` and a
variable ``list[ObjectRef[int]]`` both fit it), and a method hook (`_check_values`) then
puts back what that reading lets through: the argument, with its refs read as their values,
must fit the declared type (a ``list[int]``, not a tuple, nor a ``list[bool]``).

Enable it in your mypy configuration::

    [tool.mypy]
    plugins = ["dista_runtime.mypy_plugin"]

How: a method *signature* hook. mypy runs it once per call of ``remote``, with the signature
of the bound method, in which the ``ParamSpec`` of the ``RemoteFunction`` instance is
already replaced by the decorated function's parameters; the call is then checked against
the widened signature as usual. Only direct calls (``add.remote(...)``) are widened: the
bound method taken as a value (``f = add.remote``) keeps the function's exact parameters.

It also repairs ``@task`` on a generic ``def`` (a function hook on ``task``, method hooks on
the ``__call__`` of the ``@task(...)`` decorators): see `_generic_task`.

Actors (``@actor``), three hooks:

- a class decorator hook (`_add_remote`, after semantic analysis) gives the class the
  ``remote`` that `actor` sets at run time, as ``ClassVar[_Create[Cls]]``;
- a signature hook on ``_Create.__call__`` (`_create_signature`) makes ``Cls.remote(...)``
  take the constructor's parameters, widened as above, and return ``ActorHandle[Cls]``;
- an attribute hook on ``ActorHandle`` (`_handle_method`), which mypy calls for the names
  ``ActorHandle.__getattr__`` answers, types ``handle.add`` as ``ActorMethod[<add's
  parameters without self>, <its result, awaited for async def>]``, or reports a name that
  is no public method of the class; ``ActorMethod.remote`` is then widened as for tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from mypy.nodes import TypeInfo
from mypy.plugin import (
    AttributeContext,
    ClassDefContext,
    FunctionContext,
    MethodContext,
    MethodSigContext,
    Plugin,
)
from mypy.types import FunctionLike, Type

from ._mypy.actors import (
    ACTOR,
    CREATE_CALL,
    HANDLE,
    _add_remote,
    _check_create,
    _create_signature,
    _handle_method,
)
from ._mypy.handle_calls import (
    HANDLE_REMOTE,
    handle_remote_attribute,
    handle_remote_signature,
)
from ._mypy.tasks import (
    DECORATOR_CALLS,
    REMOTE_METHODS,
    TASK,
    TASK_REMOTES,
    _check_values,
    _generic_task,
    _remote_attribute,
    _remote_signature,
)

__all__ = ["DistaPlugin", "plugin"]

ACTOR_BASE = "dista_runtime._api.actor_base.Actor"


class DistaPlugin(Plugin):
    """Widens ``RemoteFunction*.remote`` to take refs; keeps ``@task`` on generics generic."""

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], FunctionLike] | None:
        if fullname in REMOTE_METHODS:
            return _remote_signature
        if fullname == CREATE_CALL:
            return _create_signature
        if fullname == HANDLE_REMOTE:
            return handle_remote_signature
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if fullname == TASK:
            return _generic_task
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname in DECORATOR_CALLS:
            return _generic_task
        if fullname in REMOTE_METHODS:
            return _check_values
        if fullname == CREATE_CALL:
            return _check_create
        return None

    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        if fullname in TASK_REMOTES:
            return _remote_attribute
        if fullname == HANDLE_REMOTE:
            return handle_remote_attribute
        owner, _, name = fullname.rpartition(".")
        if owner == HANDLE:
            return functools.partial(_handle_method, name=name)
        return None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        # A subclass of `dista.Actor`, at any depth, is an ``@actor`` class: typed the same.
        if fullname == ACTOR_BASE:
            return _as_actor
        base = self.lookup_fully_qualified(fullname)
        info = base.node if base is not None else None
        if isinstance(info, TypeInfo) and info.has_base(ACTOR_BASE):
            return _as_actor
        return None

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        if fullname == ACTOR:
            return _add_remote
        return None


def _as_actor(ctx: ClassDefContext) -> None:
    _add_remote(ctx)


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point (any version: the hook is part of mypy's stable plugin API)."""
    return DistaPlugin
