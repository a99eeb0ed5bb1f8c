"""The mypy plugin's half for tasks: widening parameters to take refs, checking the values
a call passes, and ``@task`` on generic functions (see `dista_runtime.mypy_plugin`)."""

from __future__ import annotations

import itertools

from mypy import errorcodes
from mypy.checker import TypeChecker
from mypy.messages import format_type
from mypy.nodes import (
    ARG_STAR,
    ARG_STAR2,
    CallExpr,
    Context,
    DictExpr,
    Expression,
    FuncItem,
    ListExpr,
    MemberExpr,
    NameExpr,
    SetExpr,
    StarExpr,
    TupleExpr,
    TypeInfo,
)
from mypy.plugin import (
    AttributeContext,
    CheckerPluginInterface,
    FunctionContext,
    MethodContext,
    MethodSigContext,
)
from mypy.subtypes import is_same_type, is_subtype
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
    has_type_vars,
)

OBJECT_REF = "dista_runtime._api.ref.ObjectRef"
REMOTE_CALL = "dista_runtime._api.call_types.RemoteCall"
ACTOR_METHOD = "dista_runtime._api.actor.ActorMethod"

TASK = "dista_runtime._api.task.task"
SINGLE_RESULT = frozenset({"dista_runtime._api.remote_function.RemoteFunction"})
MULTI_RESULT = frozenset(
    f"dista_runtime._api.remote_function.RemoteFunction{k}" for k in range(2, 7)
)
DECORATOR_CALLS = frozenset(
    f"dista_runtime._api.task.{cls}.__call__"
    for cls in ("_Decorator", *(f"_Decorator{k}" for k in range(2, 7)))
)
# Generic parameters split into overloads up to this many (2**MAX_SPLIT signatures).
MAX_SPLIT = 3
# Refs are accepted this many container levels down: ``list[list[int]]`` takes
# ``[[ref, 1], list_ref]``, but in ``list[list[list[int]]]`` the innermost ``int`` is not widened.
MAX_DEPTH = 2
# Containers whose items may be refs, each with the indices of its widened type arguments
# (a mapping's values, not its keys). The covariant ones widen in place.
COVARIANT: dict[str, tuple[int, ...]] = {
    "typing.Iterable": (0,),
    "typing.Collection": (0,),
    "typing.Sequence": (0,),
    "typing.AbstractSet": (0,),
    "builtins.frozenset": (0,),
    "builtins.tuple": (0,),  # tuple[X, ...]; a fixed tuple is a TupleType
    "typing.Mapping": (1,),
}
# The invariant ones: a ``list[int]`` cannot be read item by item as ``int | ObjectRef[int]``
# (a ``list[ObjectRef[int]]`` is no ``list[int | ObjectRef[int]]``), so the signature widens
# their covariant base instead, and `_check_values` restores the exact type.
INVARIANT: dict[str, str] = {
    "builtins.list": "typing.Sequence",
    "typing.MutableSequence": "typing.Sequence",
    "builtins.set": "typing.AbstractSet",
    "typing.MutableSet": "typing.AbstractSet",
    "builtins.dict": "typing.Mapping",
    "typing.MutableMapping": "typing.Mapping",
}
#: The tasks' ``.remote``: declared as `call_types.RemoteCall` (overloaded per number of
#: arguments, for checkers without this plugin); the plugin makes each the task's exact
#: signature (`_remote_attribute`), which it then widens like any other (`_remote_signature`).
TASK_REMOTES = frozenset(
    f"dista_runtime._api.remote_function.RemoteFunction{k}.remote"
    for k in ("", "2", "3", "4", "5", "6", "N")
)
REMOTE_METHODS = TASK_REMOTES | {"dista_runtime._api.actor.ActorMethod.remote"}


def _object_ref(ret_type: Type, ctx: MethodSigContext | MethodContext) -> TypeInfo:
    """The `ObjectRef` class, as mypy knows it.

    Taken from what ``remote`` returns (a ref, or a tuple of refs): that always works, where
    ``ctx.api.named_generic_type("dista_runtime._api.ref.ObjectRef", ...)`` walks the package's
    namespace and trips an internal assertion if ``_ref`` is not bound in it.
    """
    ret = get_proper_type(ret_type)
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


def _widen(t: Type, ref: TypeInfo, depth: int = 0) -> tuple[Type, bool]:
    """``T`` becomes ``T | ObjectRef[T]``, and the items of the containers in ``T`` alike, down
    to `MAX_DEPTH`; with whether an invariant container was loosened on the way (see
    `INVARIANT`). ``Any``, ``P.args``/``P.kwargs`` (a ParamSpec not yet bound) and unpacked
    ``*args: *Ts`` / ``**kwargs: Unpack[TD]`` stay as they are."""
    if isinstance(t, UnpackType) or isinstance(
        get_proper_type(t), AnyType | ParamSpecType | UnpackType
    ):
        return t, False
    inner, loosened = _widen_items(t, ref, depth)
    return make_simplified_union([inner, Instance(ref, [t])]), loosened


def _widen_items(t: Type, ref: TypeInfo, depth: int) -> tuple[Type, bool]:
    """``t`` with refs allowed among its items (not as ``t`` itself)."""
    if depth >= MAX_DEPTH:
        return t, False
    proper = get_proper_type(t)
    if isinstance(proper, UnionType):
        pairs = [_widen_items(item, ref, depth) for item in proper.items]
        return make_simplified_union([p[0] for p in pairs]), any(p[1] for p in pairs)
    if isinstance(proper, TupleType):
        if proper.partial_fallback.type.fullname != "builtins.tuple" or any(
            isinstance(item, UnpackType) for item in proper.items
        ):
            return t, False  # a NamedTuple, or tuple[int, *Ts]: as declared
        pairs = [_widen(item, ref, depth + 1) for item in proper.items]
        return proper.copy_modified(items=[p[0] for p in pairs]), any(p[1] for p in pairs)
    if not isinstance(proper, Instance):
        return t, False
    name = proper.type.fullname
    loosened = False
    if name in INVARIANT:
        base = next((b for b in proper.type.mro if b.fullname == INVARIANT[name]), None)
        if base is None or len(base.defn.type_vars) != len(proper.args):
            return t, False
        proper, name, loosened = Instance(base, proper.args), base.fullname, True
    if name not in COVARIANT or len(proper.args) <= max(COVARIANT[name]):
        return t, False
    args = list(proper.args)
    for i in COVARIANT[name]:
        args[i], deeper = _widen(args[i], ref, depth + 1)
        loosened |= deeper
    return proper.copy_modified(args=args), loosened


def _values(t: Type, depth: int = 0) -> Type | None:
    """What the worker receives for an argument of type ``t``: each ``ObjectRef[X]`` read as
    ``X``, at the top and down to `MAX_DEPTH` containers (the levels `_widen` opens). ``None``
    where that cannot be told (a subclass of a container, whose items are not its type
    arguments)."""
    proper = get_proper_type(t)
    if isinstance(proper, Instance) and proper.type.fullname == OBJECT_REF:
        return proper.args[0] if proper.args else AnyType(TypeOfAny.special_form)
    if depth >= MAX_DEPTH:
        return t
    if isinstance(proper, UnionType):
        items = [_values(item, depth) for item in proper.items]
        if any(item is None for item in items):
            return None
        return make_simplified_union([item for item in items if item is not None])
    if isinstance(proper, TupleType):
        items = [_values(item, depth + 1) for item in proper.items]
        if any(item is None for item in items):
            return None
        return proper.copy_modified(items=[item for item in items if item is not None])
    if not isinstance(proper, Instance):
        return t
    name = proper.type.fullname
    indices = COVARIANT.get(INVARIANT.get(name, name))
    if indices is None:
        # Not a container, or a subclass of one (``str`` is a ``Sequence[str]``): as it is,
        # unless its base holds refs, which its items may or may not be.
        known = COVARIANT.keys() | INVARIANT.keys()
        base = next((b for b in proper.type.mro[1:] if b.fullname in known), None)
        if base is None:
            return t
        # Imported here: ``mypy.maptype`` first thing in a fresh interpreter is a circular import.
        from mypy.maptype import map_instance_to_supertype

        mapped = map_instance_to_supertype(proper, base)
        value = _values(mapped, depth)
        return t if value is not None and is_same_type(value, mapped) else None
    args = list(proper.args)
    for i in indices:
        if i >= len(args):
            return None
        value = _values(args[i], depth + 1)
        if value is None:
            return None
        args[i] = value
    return proper.copy_modified(args=args)


def _bare_var(t: Type, own: set[TypeVarId]) -> bool:
    """Whether ``t`` is one of ``own`` type variables, or a union with one."""
    proper = get_proper_type(t)
    items = proper.items if isinstance(proper, UnionType) else [proper]
    return any(
        isinstance(item := get_proper_type(i), TypeVarType) and item.id in own for i in items
    )


def _remote_signature(ctx: MethodSigContext) -> FunctionLike:
    sig = ctx.default_signature
    receiver = get_proper_type(ctx.type)
    if isinstance(receiver, Instance) and receiver.type.fullname == ACTOR_METHOD:
        # Tasks' are named by `_remote_attribute`; an actor method's call is named here.
        callee = ctx.context.callee if isinstance(ctx.context, CallExpr) else None
        method = callee.expr if isinstance(callee, MemberExpr) else None
        if isinstance(method, MemberExpr):  # ``h.add.remote``: "h.add.remote" in messages
            handle = method.expr.name if isinstance(method.expr, NameExpr) else "handle"
            sig = sig.copy_modified(name=f"{handle}.{method.name}.remote")
    return _widen_signature(sig, _object_ref(sig.ret_type, ctx))


def _widen_signature(sig: CallableType, ref: TypeInfo) -> FunctionLike:
    """``sig`` with refs allowed where values are expected (see `_remote_signature`)."""
    # Nested refs are not widened where the task's own type variables are (``xs: list[T]``):
    # ``Sequence[T | ObjectRef[T]]`` given ``[ref]`` solves ``T`` to nothing (see below).
    widened = [_widen(t, ref, MAX_DEPTH if has_type_vars(t) else 0)[0] for t in sig.arg_types]
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


def _check_values(ctx: MethodContext) -> Type:
    """After a ``.remote`` call: what `_widen` loosened, checked exactly.

    The widened signature took a ``list[int]`` parameter as ``Sequence[int | ObjectRef[int]]``;
    here each argument given for such a parameter, with its refs read as their values, must
    fit ``list[int]`` itself, as the function will see it (`_misfit`). The declared parameters
    are the first type argument of the ``RemoteFunction`` the method is called on. Arguments
    that did not even fit the widened signature were reported already, and are skipped.
    """
    params = get_proper_type(ctx.type.args[0]) if isinstance(ctx.type, Instance) else None
    if isinstance(params, Parameters):
        _check_declared(ctx, params.arg_types, _object_ref(ctx.default_return_type, ctx))
    return ctx.default_return_type


def _check_declared(ctx: MethodContext, declared_types: list[Type], ref: TypeInfo) -> None:
    """`_check_values` for a call whose declared parameter types are ``declared_types``."""
    if len(declared_types) != len(ctx.arg_types):
        return
    call = ctx.context
    for declared, actuals, kinds, names, exprs in zip(
        declared_types, ctx.arg_types, ctx.arg_kinds, ctx.arg_names, ctx.args, strict=True
    ):
        if has_type_vars(declared):
            continue
        widened, loosened = _widen(declared, ref)
        if not loosened:
            continue
        for actual, kind, name, expr in zip(actuals, kinds, names, exprs, strict=True):
            if kind in (ARG_STAR, ARG_STAR2) or not is_subtype(actual, widened):
                continue  # ``*xs`` / ``**kw`` unpacked here, or reported already
            misfit = _misfit(expr, actual, declared, ref, ctx, 0)
            if misfit is None:
                continue
            if name is not None:
                label = f'"{name}"'
            elif isinstance(call, CallExpr) and any(a is expr for a in call.args):
                label = str(next(i for i, a in enumerate(call.args, 1) if a is expr))
            else:
                label = "?"
            where, got, expected = misfit
            options = ctx.api.options
            what = f"Argument {label}" if where is expr else f"An item of argument {label}"
            ctx.api.fail(
                f'{what} to "remote" has incompatible type {format_type(got, options)}; '
                f"expected {format_type(expected, options)} (refs read as their values)",
                where,
                code=errorcodes.ARG_TYPE,
            )


def _misfit(
    expr: Expression,
    actual: Type,
    declared: Type,
    ref: TypeInfo,
    ctx: MethodContext,
    depth: int,
) -> tuple[Expression, Type, Type] | None:
    """Whether ``expr`` (of type ``actual``, ``depth`` containers down) gives the worker a
    value of the ``declared`` type; if not, the innermost culprit, its type and what it
    should be.

    By type: ``actual`` with its refs read as values (`_values`) must be a ``declared``. A
    literal (``[ref, 1]``, ``{"k": ref}``, ``(ref, "x")``) is also taken item by item: inside
    an outer literal, mypy types it by its context, ``Sequence[int | ObjectRef[int]]``, which
    says nothing of what it is; its own items, typed again in that context, say it.
    """
    value = _values(actual, depth)
    if value is None or is_subtype(value, declared):
        return None
    culprit = (expr, actual, declared)
    if depth >= MAX_DEPTH or not isinstance(expr, ListExpr | SetExpr | TupleExpr | DictExpr):
        return culprit
    shell = get_proper_type(actual)
    if isinstance(shell, TupleType):
        shell = shell.partial_fallback
    if not isinstance(shell, Instance):
        return culprit
    if isinstance(expr, DictExpr):
        if any(key is None for key, _ in expr.items):
            return None  # ``{**m}``: cannot tell, let it be
        items = [v for _, v in expr.items]
    else:
        if any(isinstance(item, StarExpr) for item in expr.items):
            return None  # ``[*xs]``: likewise
        items = list(expr.items)
    found: list[tuple[Expression, Type, Type] | None] = []
    options = get_proper_type(declared)
    for option in options.items if isinstance(options, UnionType) else [options]:
        option = get_proper_type(option)
        if isinstance(option, AnyType):
            return None
        if isinstance(option, TupleType):
            if not isinstance(expr, TupleExpr) or len(option.items) != len(items):
                continue
            expected = list(option.items)
        elif isinstance(option, Instance) and shell.type.has_base(option.type.fullname):
            name = option.type.fullname
            indices = COVARIANT.get(INVARIANT.get(name, name))
            index = 1 if isinstance(expr, DictExpr) else 0
            if indices != (index,) or len(option.args) <= index:
                continue
            expected = [option.args[index]] * len(items)
        else:
            continue
        found.append(_items_misfit(items, expected, ref, ctx, depth + 1))
        if found[-1] is None:
            return None
    return found[0] if len(found) == 1 else culprit


def _items_misfit(
    items: list[Expression],
    expected: list[Type],
    ref: TypeInfo,
    ctx: MethodContext,
    depth: int,
) -> tuple[Expression, Type, Type] | None:
    for item, want in zip(items, expected, strict=True):
        context = _widen(want, ref, depth)[0]
        actual = ctx.api.get_expression_type(item, context)
        if not is_subtype(actual, context):
            continue  # reported already (a list item of the wrong type)
        misfit = _misfit(item, actual, want, ref, ctx, depth)
        if misfit is not None:
            return misfit
    return None


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


def _remote_attribute(ctx: AttributeContext) -> Type:
    """``task.remote`` as the task's own signature, named for it in messages.

    The declared type is a `call_types.RemoteCall[P, R]` (or ``RemoteCallMany[P, O]``),
    whose overloads would each be widened, and whose mismatch would read "no overload
    variant of __call__"; the call is checked against this instead, and the signature hook
    widens it."""
    task = get_proper_type(ctx.type)
    declared = get_proper_type(ctx.default_attr_type)
    if not (
        isinstance(task, Instance)
        and isinstance(declared, Instance)
        and len(task.args) >= 1
        and len(declared.args) == 2
    ):
        return ctx.default_attr_type
    params = get_proper_type(task.args[0])
    if not isinstance(params, Parameters):
        return ctx.default_attr_type
    result = declared.args[1]
    if declared.type.fullname == REMOTE_CALL:
        ref = _object_ref_of(ctx.api)
        if ref is None:
            return ctx.default_attr_type
        result = Instance(ref, [result])
    return CallableType(
        params.arg_types,
        params.arg_kinds,
        params.arg_names,
        result,
        ctx.api.named_generic_type("builtins.function", []),
        name=f"{_task_name(ctx.context)}.remote",
        variables=params.variables,
    )


def _task_name(context: Context) -> str:
    """What the source calls the task (``add`` in ``add.remote``), for messages."""
    target = context.expr if isinstance(context, MemberExpr) else None
    # ``split.options(...).remote``: the task is what ``options`` was called on.
    while isinstance(target, CallExpr) and isinstance(target.callee, MemberExpr):
        target = target.callee.expr
    if isinstance(target, NameExpr | MemberExpr):
        return target.name
    return "task"


def _object_ref_of(api: CheckerPluginInterface) -> TypeInfo | None:
    """The `ObjectRef` class, from the checker's modules (where no ref is at hand)."""
    modules = api.modules if isinstance(api, TypeChecker) else {}
    module = modules.get(OBJECT_REF.rpartition(".")[0])
    found = module.names.get("ObjectRef") if module is not None else None
    return found.node if found is not None and isinstance(found.node, TypeInfo) else None
