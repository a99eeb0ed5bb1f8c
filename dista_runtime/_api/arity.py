"""Whether a call's arguments bind to the function it calls, checked at ``.remote()``.

A call that cannot bind (a missing argument, one too many, an unknown keyword) raises
`TypeError` at once, naming the task or method, as calling the function here would; not a
`TaskError` from the worker at ``.get()``. Submitting is a hot path (a driver submits tens
of thousands of tasks a second), so the common shape (positional arguments only, within the
function's counts) is two comparisons; anything else binds with `inspect.Signature.bind`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final

__all__ = ["Arity", "method_arities"]

_POSITIONAL: Final = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class Arity:
    """The argument counts ``fn`` takes, for ``what`` (its name in the error)."""

    __slots__ = ("_index", "_least", "_most", "_required", "_signature", "what")

    def __init__(self, fn: Callable[..., Any], what: str, *, bound: bool = False) -> None:
        self.what = what
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin or C function without one: not checked
            self._signature: inspect.Signature | None = None
            self._least, self._most = 0, -1
            self._index: dict[str, int] | None = None
            self._required: list[tuple[int, str]] = []
            return
        params = list(signature.parameters.values())
        if bound and params and params[0].kind in _POSITIONAL:
            params = params[1:]  # a method's self, given by the actor
            signature = signature.replace(parameters=params)
        self._signature = signature
        positional = [p for p in params if p.kind in _POSITIONAL]
        self._least = sum(p.default is inspect.Parameter.empty for p in positional)
        varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        # A keyword-only parameter without a default: positional calls never bind.
        required_keywords = any(
            p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
            for p in params
        )
        self._most = -1 if required_keywords else (1 << 30 if varargs else len(positional))
        # Keywords, for the plain shape (parameters that are positional or keyword, and
        # nothing else): each keyword names a parameter not given by position, and every
        # parameter without a default is given one way or the other.
        plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
        self._index = {p.name: i for i, p in enumerate(params)} if plain else None
        self._required = [
            (i, p.name) for i, p in enumerate(params) if p.default is inspect.Parameter.empty
        ]

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Raise TypeError if ``args`` and ``kwargs`` do not bind to the function."""
        given = len(args)
        if not kwargs and self._least <= given <= self._most:
            return
        if self._signature is None:
            return
        if self._index is not None and self._plain_binds(given, kwargs):
            return
        try:
            self._signature.bind(*args, **kwargs)
        except TypeError as e:
            why = f"{self.what}(): {e} (its parameters: {_shown(self._signature)})"
            raise TypeError(why) from None

    def _plain_binds(self, given: int, kwargs: dict[str, Any]) -> bool:
        """Whether a call binds to a plain signature (`_index`), without `bind`'s cost."""
        index = self._index
        assert index is not None
        if given > len(index):
            return False
        for name in kwargs:
            if index.get(name, -1) < given:  # unknown, or given by position too
                return False
        return all(i < given or name in kwargs for i, name in self._required)


def _shown(signature: inspect.Signature) -> str:
    """``signature``'s parameters as they were written (annotations without the quotes
    that postponed evaluation gives them), without its return annotation."""
    kind = inspect.Parameter
    params = list(signature.parameters.values())
    out: list[str] = []
    starred = any(p.kind is kind.VAR_POSITIONAL for p in params)
    for i, p in enumerate(params):
        if p.kind is kind.KEYWORD_ONLY and not starred:
            out.append("*")
            starred = True
        text = str(p.replace(annotation=kind.empty, default=kind.empty))
        if p.annotation is not kind.empty:
            note = p.annotation
            text += f": {note if isinstance(note, str) else inspect.formatannotation(note)}"
        if p.default is not kind.empty:
            text += f" = {p.default!r}" if p.annotation is not kind.empty else f"={p.default!r}"
        out.append(text)
        following = params[i + 1].kind if i + 1 < len(params) else None
        if p.kind is kind.POSITIONAL_ONLY and following is not kind.POSITIONAL_ONLY:
            out.append("/")
    return f"({', '.join(out)})"


def method_arities(cls: type) -> dict[str, Arity]:
    """An `Arity` for each public method of an actor class (the methods
    `dista_runtime._values.registry.method_table` numbers), and its constructor's as
    ``__init__``."""
    name = cls.__qualname__
    found: dict[str, Arity] = {"__init__": Arity(cls, f"{name}.remote")}
    for method, member in inspect.getmembers(cls, callable):
        if method.startswith("_") or isinstance(member, type):
            continue
        # A plain function's first parameter is the instance; a static or class method
        # (bound to the class already) has none to drop.
        bound = inspect.isfunction(member) and not isinstance(
            inspect.getattr_static(cls, method), staticmethod
        )
        found[method] = Arity(member, f"{name}.{method}.remote", bound=bound)
    return found
