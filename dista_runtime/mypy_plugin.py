"""A mypy plugin: ``task.remote`` takes a ref wherever it takes a value.

``add.remote(ref, 3)`` runs ``add(ref.get(), 3)`` on a worker, but ``.remote`` is typed with
the function's own ``ParamSpec``, which cannot say "each parameter may also be an
`ObjectRef` of its type". This plugin says it: for calls of ``.remote`` on the four
``RemoteFunction`` classes it rewrites each parameter ``a: T`` to ``a: T | ObjectRef[T]``
(for ``*args: T`` and ``**kwargs: T`` the element type), keeping names, kinds and defaults,
so missing, extra and mistyped arguments are still errors, and so is a ref of the wrong
type. ``Any`` parameters stay ``Any``.

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
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from mypy.nodes import FuncItem, TypeInfo
from mypy.plugin import FunctionContext, MethodContext, MethodSigContext, Plugin
from mypy.typeops import make_simplified_union
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    Overloaded,
    Parameters,
    ParamSpecType,
    TupleType,
    Type,
    TypeOfAny,
    TypeVarId,
    TypeVarType,
    UnionType,
    UnpackType,
    get_proper_type,
)

__all__ = ["DistaPlugin", "plugin"]

OBJECT_REF = "dista_runtime._ref.ObjectRef"

TASK = "dista_runtime._task.task"
SINGLE_RESULT = frozenset({"dista_runtime._task.RemoteFunction"})
MULTI_RESULT = frozenset(
    {"dista_runtime._task.RemoteFunction2", "dista_runtime._task.RemoteFunction3"}
)
DECORATOR_CALLS = frozenset(
    f"dista_runtime._task.{cls}.__call__" for cls in ("_Decorator", "_Decorator2", "_Decorator3")
)
# Generic parameters split into overloads up to this many (2**MAX_SPLIT signatures).
MAX_SPLIT = 3
REMOTE_METHODS = frozenset(
    f"dista_runtime._task.{cls}.remote"
    for cls in ("RemoteFunction", "RemoteFunction2", "RemoteFunction3", "RemoteFunctionN")
)


def _object_ref(sig: CallableType, ctx: MethodSigContext) -> TypeInfo:
    """The `ObjectRef` class, as mypy knows it.

    Taken from what ``remote`` returns (a ref, or a tuple of refs): that always works, where
    ``ctx.api.named_generic_type("dista_runtime._ref.ObjectRef", ...)`` walks the package's
    namespace and trips an internal assertion if ``_ref`` is not bound in it.
    """
    ret = get_proper_type(sig.ret_type)
    candidates: list[Type] = [ret]
    if isinstance(ret, TupleType):
        candidates += ret.items
    elif isinstance(ret, Instance):
        candidates += ret.args
    for candidate in candidates:
        proper = get_proper_type(candidate)
        if isinstance(proper, Instance) and proper.type.fullname == OBJECT_REF:
            return proper.type
    return ctx.api.named_generic_type(OBJECT_REF, [AnyType(TypeOfAny.special_form)]).type


def _widen(t: Type, ref: TypeInfo) -> Type:
    """``T`` becomes ``T | ObjectRef[T]``; ``Any``, ``P.args``/``P.kwargs`` (a ParamSpec not
    yet bound) and unpacked ``*args: *Ts`` / ``**kwargs: Unpack[TD]`` stay as they are."""
    if isinstance(t, UnpackType) or isinstance(
        get_proper_type(t), AnyType | ParamSpecType | UnpackType
    ):
        return t
    return make_simplified_union([t, Instance(ref, [t])])


def _bare_var(t: Type, own: set[TypeVarId]) -> bool:
    """Whether ``t`` is one of ``own`` type variables, or a union with one."""
    proper = get_proper_type(t)
    items = proper.items if isinstance(proper, UnionType) else [proper]
    return any(
        isinstance(item := get_proper_type(i), TypeVarType) and item.id in own for i in items
    )


def _remote_signature(ctx: MethodSigContext) -> FunctionLike:
    sig = ctx.default_signature
    ref = _object_ref(sig, ctx)
    widened = [_widen(t, ref) for t in sig.arg_types]
    # A parameter typed by one of the call's own type variables (``x: T`` or ``x: T | None`` of
    # a generic task) is not helped by ``T | ObjectRef[T]``: given an ``ObjectRef[int]`` both
    # sides fit (``T = ObjectRef[int]`` or ``T = int``) and mypy infers nothing. Such a
    # parameter gets two overloads, tried in order: ``ObjectRef[T]``, then the widened type
    # (where a value, or another argument, pins ``T`` down).
    own = {v.id for v in sig.variables}
    split = [i for i, t in enumerate(sig.arg_types) if _bare_var(t, own)]
    if not split or len(split) > MAX_SPLIT:
        return sig.copy_modified(arg_types=widened)
    items = []
    for size in range(len(split), -1, -1):
        for refs in itertools.combinations(split, size):
            types = [
                Instance(ref, [t]) if i in refs else w
                for i, (t, w) in enumerate(zip(sig.arg_types, widened, strict=True))
            ]
            items.append(sig.copy_modified(arg_types=types))
    return Overloaded(items)


def _generic_task(ctx: FunctionContext | MethodContext) -> Type:
    """``@task`` on a generic ``def``: what the plain overload would have said.

    The decorators' first overload, ``Callable[P, Coroutine[Any, Any, R]]`` (for ``async
    def``), also matches a generic plain function: mypy solves ``def [T] (x: T) -> T`` by
    ``T = Coroutine[Any, Any, R]`` and the task's parameters come out as coroutines. For a
    generic function that is not ``async def`` this rebuilds the ``RemoteFunction`` from the
    function itself, generic as mypy makes it for a single-overload decorator.
    """
    default = get_proper_type(ctx.default_return_type)
    if not (
        isinstance(default, Instance)
        and default.type.fullname in SINGLE_RESULT | MULTI_RESULT
        and ctx.arg_types
        and len(ctx.arg_types[0]) == 1
    ):
        return ctx.default_return_type
    fn = get_proper_type(ctx.arg_types[0][0])
    if not (
        isinstance(fn, CallableType)
        and fn.variables
        and all(isinstance(v, TypeVarType) for v in fn.variables)
        and isinstance(fn.definition, FuncItem)
        and not fn.definition.is_coroutine
    ):
        return ctx.default_return_type
    if default.type.fullname in SINGLE_RESULT:
        results = [fn.ret_type]
    else:
        ret = get_proper_type(fn.ret_type)
        if not isinstance(ret, TupleType) or len(ret.items) != len(default.args) - 1:
            return ctx.default_return_type
        results = list(ret.items)
    params = Parameters(fn.arg_types, fn.arg_kinds, fn.arg_names, variables=fn.variables)
    return default.copy_modified(args=[params, *results])


class DistaPlugin(Plugin):
    """Widens ``RemoteFunction*.remote`` to take refs; keeps ``@task`` on generics generic."""

    def get_method_signature_hook(
        self, fullname: str
    ) -> Callable[[MethodSigContext], FunctionLike] | None:
        if fullname in REMOTE_METHODS:
            return _remote_signature
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if fullname == TASK:
            return _generic_task
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname in DECORATOR_CALLS:
            return _generic_task
        return None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point (any version: the hook is part of mypy's stable plugin API)."""
    return DistaPlugin
