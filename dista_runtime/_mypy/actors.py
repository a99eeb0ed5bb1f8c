"""The mypy plugin's half for actors: ``remote`` on an ``@actor`` class, ``Cls.remote(...)``
checked against the constructor, ``handle.method`` typed from the class (see
`dista_runtime.mypy_plugin`)."""

from __future__ import annotations

from mypy import errorcodes
from mypy.nodes import (
    MDEF,
    Decorator,
    FuncItem,
    OverloadedFuncDef,
    SymbolNode,
    SymbolTableNode,
    TypeInfo,
    Var,
)
from mypy.plugin import (
    AttributeContext,
    ClassDefContext,
    MethodContext,
    MethodSigContext,
)
from mypy.subtypes import find_member
from mypy.typeops import type_object_type
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    Overloaded,
    Parameters,
    Type,
    TypeOfAny,
    TypeVarType,
    get_proper_type,
)
from mypy.typevars import fill_typevars_with_any

from .tasks import (
    _check_declared,
    _object_ref_of,
    _widen_signature,
)

ACTOR = "dista_runtime._api.actor.actor"
HANDLE = "dista_runtime._api.actor.ActorHandle"
METHOD = "dista_runtime._api.actor.ActorMethod"
CREATE = "dista_runtime._api.actor._Create"
CREATE_CALL = f"{CREATE}.__call__"
OPTIONS = "dista_runtime._api.actor._Options"
# What `ActorHandle` itself answers to (`dista_runtime._api.actor._RESERVED`).
RESERVED = frozenset({"remote", "options", "checkpoint", "checkpoint_async", "kill"})


def _add_remote(ctx: ClassDefContext) -> bool:
    """``@actor`` (bare or called): the class gets ``remote: ClassVar[_Create[Cls]]``.

    As at run time, where `actor` sets ``Cls.remote = _Create(...)``. The attribute says only
    which class it creates; `_create_signature` makes its calls take the constructor's
    parameters, at type-checking time, when they are known. A generic class's own type
    arguments are left ``Any`` here (``Box.remote`` infers them from the call). A class that
    defines a name handles use themselves is an error, as it is at run time; a ``remote`` it
    only declares (an annotation, for checkers without this plugin) is replaced.
    """
    info = ctx.cls.info
    existing = info.names.get("remote")
    if existing is not None and existing.plugin_generated:
        return True  # hooks may run more than once
    clash = sorted(
        name
        for name in RESERVED
        if (sym := info.names.get(name)) is not None
        and not sym.implicit
        and (not isinstance(sym.node, Var) or sym.node.has_explicit_value)
    )
    if clash:
        names = ", ".join(f'"{name}"' for name in clash)
        ctx.api.fail(
            f'Actor class "{info.name}" defines {names}, which actor handles use themselves: '
            "rename them",
            ctx.cls,
        )
        if "remote" in clash:
            return True
    create = ctx.api.lookup_fully_qualified_or_none(CREATE)
    if create is None or not isinstance(create.node, TypeInfo):
        return True  # not our ``actor`` after all: leave the class alone
    options = ctx.api.lookup_fully_qualified_or_none(OPTIONS)
    added = [("remote", create)] + ([("options", options)] if options is not None else [])
    for name, node in added:
        if not isinstance(node.node, TypeInfo):
            continue
        # ``options(name=...)`` gives an object whose ``remote`` is a ``_Create[Cls]`` too.
        var = Var(name, Instance(node.node, [fill_typevars_with_any(info)]))
        var.info = info
        var._fullname = f"{info.fullname}.{name}"
        var.is_classvar = True
        var.allow_incompatible_override = True  # an actor subclass's makes the subclass
        info.names[name] = SymbolTableNode(MDEF, var, plugin_generated=True)
    return True


def _constructor(
    ctx: MethodSigContext | MethodContext,
) -> tuple[FunctionLike, TypeInfo, Instance] | None:
    """What ``Cls.remote`` calls: ``Cls``'s constructor (as ``Cls(...)`` is typed), ``Cls``,
    and the ``ActorHandle[T]`` ``_Create.__call__`` returns, to put the class in."""
    create = get_proper_type(ctx.type)
    if not isinstance(create, Instance) or create.type.fullname != CREATE or not create.args:
        return None
    cls = get_proper_type(create.args[0])
    handle = get_proper_type(
        ctx.default_signature.ret_type
        if isinstance(ctx, MethodSigContext)
        else ctx.default_return_type
    )
    if (
        not isinstance(cls, Instance)
        or not isinstance(handle, Instance)
        or handle.type.fullname != HANDLE
    ):
        return None
    ctor = type_object_type(cls.type)
    return (ctor, cls.type, handle) if isinstance(ctor, FunctionLike) else None


def _create_signature(ctx: MethodSigContext) -> FunctionLike:
    """``Cls.remote(...)``: the constructor's parameters, widened as for tasks, returning
    ``ActorHandle[Cls]`` (for a generic class, of the type arguments the call infers)."""
    found = _constructor(ctx)
    ref = _object_ref_of(ctx.api)
    if found is None or ref is None:
        return ctx.default_signature
    ctor, cls, handle = found
    items: list[CallableType] = []
    for item in ctor.items:
        sig = item.copy_modified(
            ret_type=handle.copy_modified(args=[item.ret_type]),
            fallback=ctx.default_signature.fallback,  # a function now, no longer the class
            name=f"{cls.name}.remote",  # messages say '"Counter.remote"'
            definition=None,  # or they would list ``self`` among the parameters
        )
        items += _widen_signature(sig, ref).items
    return items[0] if len(items) == 1 else Overloaded(items)


def _check_create(ctx: MethodContext) -> Type:
    """After ``Cls.remote(...)``: `_check_values` against the constructor's parameters (not
    for an overloaded constructor, whose matching item is not known here)."""
    found = _constructor(ctx)
    ref = _object_ref_of(ctx.api)
    if found is not None and ref is not None and isinstance(found[0], CallableType):
        _check_declared(ctx, found[0].arg_types, ref)
    return ctx.default_return_type


def _handle_method(ctx: AttributeContext, name: str) -> Type:
    """``handle.name`` for a ``handle: ActorHandle[Cls]``: ``ActorMethod[<the method's
    parameters>, <its result>]``, or an error where ``Cls`` has no such public method.

    mypy calls this for every attribute found through ``ActorHandle.__getattr__`` (the
    handle's own attributes and methods are not). The parameters are those of the method
    bound to an instance, so without ``self`` (a ``staticmethod``'s all of them), with the
    class's type arguments put in; ``async def`` gives the awaited type, as the call's
    result is what the coroutine returns. An overloaded method stays ``ActorMethod[..., Any]``
    (one ``ParamSpec`` cannot hold overloads). ``.remote`` then widens them as for tasks.
    """
    default = get_proper_type(ctx.default_attr_type)
    handle = get_proper_type(ctx.type)
    if (
        ctx.is_lvalue
        or not isinstance(default, Instance)
        or default.type.fullname != METHOD
        or not isinstance(handle, Instance)
        or handle.type.fullname != HANDLE
        or handle.type.get(name) is not None
        or len(handle.args) != 1
    ):
        return ctx.default_attr_type
    cls = get_proper_type(handle.args[0])
    if isinstance(cls, TypeVarType):
        bound = get_proper_type(cls.upper_bound)
        if isinstance(bound, Instance) and bound.type.fullname == "builtins.object":
            return ctx.default_attr_type  # ``ActorHandle[T]``, T unknown
        cls = bound
    if not isinstance(cls, Instance):
        return ctx.default_attr_type  # Any, a union, ...: methods unknown
    actor = cls.type.name
    sym = cls.type.get(name)
    if name.startswith("_") and sym is not None:
        return _no_method(ctx, f'"{name}" of actor "{actor}" is private: handles call public ones')
    if sym is None or name.startswith("_"):
        if cls.type.fallback_to_any:
            return ctx.default_attr_type  # a class with an ``Any`` base: who knows
        return _no_method(ctx, f'Actor "{actor}" has no method "{name}"')
    node = sym.node
    member = get_proper_type(find_member(name, cls, cls))
    if isinstance(member, AnyType):
        return ctx.default_attr_type
    if (
        isinstance(node, TypeInfo)
        or not isinstance(member, CallableType | Overloaded)
        or (isinstance(node, Decorator) and node.var.is_property)
        or (isinstance(node, OverloadedFuncDef) and node.is_property)
        or (isinstance(node, Var) and (sym.implicit or not node.has_explicit_value))
    ):
        return _no_method(ctx, f'"{name}" of actor "{actor}" is not a method')
    if isinstance(member, Overloaded):
        return ctx.default_attr_type
    ret = member.ret_type
    coroutine = get_proper_type(ret)
    if (
        _is_async(node, member)
        and isinstance(coroutine, Instance)
        and coroutine.type.fullname == "typing.Coroutine"
        and len(coroutine.args) == 3
    ):
        ret = coroutine.args[2]
    params = Parameters(
        member.arg_types, member.arg_kinds, member.arg_names, variables=member.variables
    )
    return default.copy_modified(args=[params, ret])


def _is_async(node: SymbolNode | None, member: CallableType) -> bool:
    """Whether the method is an ``async def`` (as `method_table` tells at run time)."""
    if isinstance(member.definition, FuncItem):
        return member.definition.is_coroutine
    if isinstance(node, Decorator):
        return node.func.is_coroutine
    return isinstance(node, FuncItem) and node.is_coroutine


def _no_method(ctx: AttributeContext, message: str) -> Type:
    ctx.api.fail(message, ctx.context, code=errorcodes.ATTR_DEFINED)
    return AnyType(TypeOfAny.from_error)
