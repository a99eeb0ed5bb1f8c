"""The plugin's half for ``handle.remote(Cls.method, ...)`` (`ActorHandle.remote`).

Without the plugin, checkers type the call by `call_types.ActorCall`'s overloads, whose
mismatches mypy reports against the first overload ("expected Callable[[Ledger, str],
Coroutine[...]]", with advice about ``self``). With it, the call is checked against one
signature built from the method given: its parameters after ``self``, each taking a ref of
its type (top level, keywords too: a ref inside a container still goes through
``dista.value_of``), and its result (awaited, for ``async def``); errors name the method
(``"Ledger.deposit.remote"``), and a method of another class is reported as such.
"""

from __future__ import annotations

from mypy import errorcodes
from mypy.nodes import ARG_POS, ARG_STAR, ARG_STAR2, FuncItem
from mypy.plugin import AttributeContext, MethodSigContext
from mypy.subtypes import is_subtype
from mypy.types import (
    AnyType,
    CallableType,
    FunctionLike,
    Instance,
    Overloaded,
    Type,
    TypeOfAny,
    get_proper_type,
)

from .tasks import MAX_DEPTH, _object_ref_of, _widen

HANDLE_REMOTE = "dista_runtime._api.actor.ActorHandle.remote"


def handle_remote_attribute(ctx: AttributeContext) -> Type:
    """``h.remote``: one plain signature for `handle_remote_signature` to refine per call
    (the declared `ActorCall` is overloaded, and mypy would refine each overload)."""
    if not isinstance(get_proper_type(ctx.type), Instance):
        return ctx.default_attr_type
    anything = AnyType(TypeOfAny.special_form)
    ref = _object_ref_of(ctx.api)
    if ref is None:
        return ctx.default_attr_type
    return CallableType(
        [anything, anything, anything],
        [ARG_POS, ARG_STAR, ARG_STAR2],
        ["method", None, None],
        Instance(ref, [anything]),
        ctx.api.named_generic_type("builtins.function", []),
        name="remote of ActorHandle",
    )


def handle_remote_signature(ctx: MethodSigContext) -> FunctionLike:
    """``h.remote(Cls.method, ...)`` checked against ``method`` itself."""
    handle = get_proper_type(ctx.type)
    ref = _object_ref_of(ctx.api)
    if not (ctx.args and ctx.args[0] and isinstance(handle, Instance) and ref is not None):
        return ctx.default_signature
    given = get_proper_type(ctx.api.get_expression_type(ctx.args[0][0]))
    items = given.items if isinstance(given, Overloaded) else [given]
    made: list[CallableType] = []
    for item in items:
        if (
            not isinstance(item, CallableType)
            or not item.arg_types
            or item.arg_kinds[0] != ARG_POS
        ):
            return ctx.default_signature  # not a plain method: the declared overloads say
        method, _, owner = (item.name or "method").partition(" of ")  # "deposit of Ledger"
        label = f"{owner}.{method}" if owner else method
        actor = handle.args[0] if handle.args else AnyType(TypeOfAny.special_form)
        if not is_subtype(actor, item.arg_types[0]):
            kind = get_proper_type(actor)
            shown = kind.type.name if isinstance(kind, Instance) else str(actor)
            ctx.api.fail(
                f'"{label}" is not a method of actor "{shown}": h.remote takes one of its own',
                ctx.context,
                code=errorcodes.ARG_TYPE,
            )
            return ctx.default_signature
        result = item.ret_type
        coroutine = get_proper_type(result)
        if (
            isinstance(item.definition, FuncItem)
            and item.definition.is_coroutine
            and isinstance(coroutine, Instance)
            and coroutine.type.fullname == "typing.Coroutine"
            and len(coroutine.args) == 3
        ):
            result = coroutine.args[2]  # what the call's ref holds: the awaited result
        made.append(
            CallableType(
                [given, *(_widen(t, ref, MAX_DEPTH)[0] for t in item.arg_types[1:])],
                [ARG_POS, *item.arg_kinds[1:]],
                [None, *item.arg_names[1:]],
                Instance(ref, [result]),
                ctx.default_signature.fallback,
                name=f"{label}.remote",
                variables=item.variables,
            )
        )
    return made[0] if len(made) == 1 else Overloaded(made)
