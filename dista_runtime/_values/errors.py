"""How a task's exception crosses the wire, and comes back as the `TaskError` users see.

An error frame carries text only. A worker sends ``"Type: message"``, the remote traceback,
and, when the exception pickles, a marker line and the pickled exception in base64; the
head passes the text on as is (wrapping it in "input ... failed: ..." for dependents). The
driver raises a `TaskError` that is also an instance of the original type where it can be.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import pickle
import re
import sys
import traceback
from typing import Final

from .._errors import TaskCancelledError, TaskError
from .codec import dumps

__all__ = ["error_from_message", "message_from_exception", "remote_traceback"]

_MARK: Final = "\n--- dista: pickled exception ---\n"


def message_from_exception(error: BaseException) -> str:
    """What a worker puts in the error frame for a task that raised ``error``.

    The traceback shows the user's frames, not Dista's (set ``DISTA_FULL_TRACEBACKS=1`` on
    the worker to keep every frame). Only an `Exception` travels pickled: a `SystemExit` or
    `KeyboardInterrupt` raised on the driver would stop the driver, so those, like every
    other `BaseException`, come back as a plain `TaskError` that says what happened.
    """
    if isinstance(error, TaskError):
        # A task that failed reading another task's result: it travels as what that one
        # raised (`except ValueError` works through any depth of nesting), its text saying
        # where, and both tracebacks.
        return _nested_message(error)
    kind = type(error)
    type_name = kind.__qualname__
    module = kind.__module__
    if module not in ("builtins", "__main__"):
        type_name = f"{module}.{type_name}"
    if isinstance(error, SystemExit):
        summary = f"{type_name}: the task called {_exit_call(error.code)}"
    elif isinstance(error, KeyboardInterrupt):
        summary = f"{type_name}: the task was interrupted"
    elif not isinstance(error, Exception):
        said = str(error)
        summary = f"{type_name}: {said}" if said else f"{type_name}: the task raised {type_name}"
    else:
        summary = f"{type_name}: {error}"
    if "\n" in summary:  # the first line is the summary: the rest is in the traceback
        summary = summary.partition("\n")[0] + " ..."
    text = f"{summary}\n{remote_traceback(error)}"
    if not isinstance(error, Exception):
        return text
    blob = _pickle_exception(error)
    return text if blob is None else text + _MARK + base64.b64encode(blob).decode()


_TASK_ERROR_FIELDS: Final = frozenset({"message", "type_name", "remote_traceback", "object_id"})


def _nested_message(error: TaskError) -> str:
    text = f"{error.message}\n{remote_traceback(error)}"
    original = next((c for c, dual in _DUAL.items() if dual is type(error)), None)
    if original is None:
        return text
    inner = _Pickled(error)
    inner.kind = original
    inner.state = {k: v for k, v in inner.state.items() if k not in _TASK_ERROR_FIELDS}
    try:
        blob = dumps(inner)
        _revive(pickle.loads(blob))
    except Exception:
        return text
    return text + _MARK + base64.b64encode(blob).decode()


def _pickle_exception(error: Exception) -> bytes | None:
    """``error`` pickled so that the driver can load it, or None."""
    try:
        blob = dumps(error)
        pickle.loads(blob)  # one that does not come back is no use to the driver
        return blob
    except Exception:
        kind = type(error)
        if kind.__reduce__ is not BaseException.__reduce__:
            return None  # it chose how to pickle (or not to)
        if kind.__reduce_ex__ is not BaseException.__reduce_ex__:
            return None
    try:
        blob = dumps(_Pickled(error))
        _revive(pickle.loads(blob))
        return blob
    except Exception:
        return None


class _Pickled:
    """An exception as its class, args and attributes: it comes back without calling the
    class's ``__init__``, so one whose ``__init__`` takes other arguments than its ``args``
    (``def __init__(self, message, code)``) comes back too, where pickle would fail."""

    __slots__ = ("args", "kind", "state")

    def __init__(self, error: BaseException) -> None:
        self.kind = type(error)
        self.args = error.args
        self.state = dict(getattr(error, "__dict__", {}))

    def __reduce__(self) -> tuple[object, ...]:
        return (_pickled, (self.kind, self.args, self.state))


def _pickled(
    kind: type[BaseException], args: tuple[object, ...], state: dict[str, object]
) -> _Pickled:
    out = _Pickled.__new__(_Pickled)
    out.kind, out.args, out.state = kind, args, state
    return out


def _revive(loaded: object) -> BaseException:
    """The exception a `_Pickled` (or, from an older worker, a plain pickle) stands for."""
    if isinstance(loaded, BaseException):
        return loaded
    if not isinstance(loaded, _Pickled):
        raise TypeError(f"not an exception: {type(loaded).__qualname__}")
    error = loaded.kind.__new__(loaded.kind, *loaded.args)
    error.args = loaded.args
    if loaded.state:
        error.__dict__.update(loaded.state)
    return error


def _exit_call(code: object) -> str:
    return "sys.exit()" if code is None else f"sys.exit({code!r})"


def remote_traceback(error: BaseException) -> str:
    """``error``'s traceback as text, without Dista's own frames (nor the runner thread's)."""
    te = traceback.TracebackException(type(error), error, error.__traceback__, compact=True)
    if not os.environ.get("DISTA_FULL_TRACEBACKS"):
        _prune(te, _hidden_prefixes(), set())
    return "".join(te.format())


def _prune(te: traceback.TracebackException, hidden: tuple[str, ...], seen: set[int]) -> None:
    if id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if not os.path.abspath(f.filename).startswith(hidden)]
    )
    for other in (te.__cause__, te.__context__, *(getattr(te, "exceptions", None) or ())):
        if other is not None:
            _prune(other, hidden, seen)


_hidden: tuple[str, ...] = ()


def _hidden_prefixes() -> tuple[str, ...]:
    """Where the frames a user need not see live: Dista's packages, the cloudpickle they
    call, and the standard library's thread machinery that runs tasks."""
    global _hidden
    if not _hidden:
        import concurrent.futures.thread
        import threading

        import cloudpickle

        places = [
            threading.__file__,
            concurrent.futures.thread.__file__,
            os.path.dirname(cloudpickle.__file__) + os.sep,
        ]
        for name in (
            "dista_proto",
            "dista_runtime",
            "dista_asyncio",
            "dista_anyio",
            "dista_gevent",
        ):
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            places.extend(
                os.path.join(where, "")
                for where in (spec and spec.submodule_search_locations) or ()
            )
        _hidden = tuple(places)
    return _hidden


def error_from_message(message: str, object_id: int) -> TaskError:
    """The exception to raise for an object that failed with ``message``."""
    original: BaseException | None = None
    text, mark, blob = message.partition(_MARK)
    if mark:
        try:
            original = _revive(pickle.loads(base64.b64decode(blob)))
        except Exception:
            original = None
    summary, _, remote_tb = text.partition("\n")
    summary = _advise(_named(summary))
    type_name = summary.partition(": ")[0] if ": " in summary else ""
    if " failed: " in summary and summary.startswith("input "):
        type_name = summary.rsplit(" failed: ", 1)[-1].partition(": ")[0]
    if message == "cancelled" or summary.endswith("failed: cancelled"):
        return TaskCancelledError(summary, "cancelled", "", object_id)
    if isinstance(original, Exception):
        both = _both(original, summary, type_name, remote_tb, object_id)
        if both is not None:
            return both
    error = TaskError(summary, type_name, remote_tb, object_id)
    if original is not None:
        error.__cause__ = original
    return error


_NO_WORKER: Final = re.compile(r"no worker can run task 0x([0-9a-f]+): ")
_LACKING: Final = re.compile(r"lack tasks ((?:0x[0-9a-f]+(?:, )?)+)")


_ACTOR_TYPE: Final = re.compile(r"actor type (0x[0-9a-f]+)")


def _named(summary: str) -> str:
    """An actor type's hash in a message (from a worker or the head) as its class, when
    this process defines it: "actor type 0x8db4… " reads "actor class app.Counter"."""
    from . import names

    def name(found: re.Match[str]) -> str:
        label = dict(names.entries()).get(int(found.group(1), 16))
        return f"actor class {label}" if label else found.group(0)

    return _ACTOR_TYPE.sub(name, summary) if "actor type 0x" in summary else summary


def _advise(summary: str) -> str:
    """The head's "no worker can run task 0x..." in the driver's words: which of its task
    modules no connected worker imports (the closest workers' missing tasks, when the head
    knows them), and the flag that adds them."""
    if _NO_BY_VALUE in summary:
        return _advise_by_value(summary)
    found = _NO_WORKER.search(summary)
    if found is None:
        return summary
    from .registry import lookup  # the driver's own tasks, known by name

    lacking = _LACKING.search(summary)
    ids = [int(t, 16) for t in lacking.group(1).split(", ")] if lacking else []
    tasks = [f for f in map(lookup, ids or [int(found.group(1), 16)]) if f is not None]
    modules = sorted({m for f in tasks if (m := getattr(f, "__module__", None))})
    if not modules:
        return summary
    names = ", ".join(f"{f.__module__}.{getattr(f, '__qualname__', '?')}" for f in tasks[:4])
    flags = " ".join(f"--import {m}" for m in modules)
    which = "module" if len(modules) == 1 else "modules"
    advice = (
        f"no worker imports {which} {', '.join(modules)}: start workers with {flags} "
        f"(task {names}; a worker runs the tasks of drivers whose task modules it imports)"
    )
    return f"{summary[: found.start()]}{advice}; {summary[found.start() :]}"


_NO_BY_VALUE: Final = "no worker may run by-value "


def _advise_by_value(summary: str) -> str:
    """The head's "no worker may run by-value ...", for the case that puzzles people: a
    script run as ``python -m m`` whose workers import ``m``. Its tasks are ``__main__``'s
    here, so they travel by value, and workers importing ``m`` do not count for them."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = getattr(spec, "name", None)
    if not module or module == "__main__":
        return summary
    advice = (
        f"this script runs as `python -m {module}`, so its tasks and actors are defined in "
        f"__main__ and travel by value, even to workers that --import {module}: in the "
        f"script, use them from the module (`import {module}`, then `{module}.f.remote()`), "
        "or start workers with --accept-by-value"
    )
    return f"{advice}; {summary}"


_DUAL: dict[type[BaseException], type[TaskError]] = {}


def _both(
    original: Exception, summary: str, type_name: str, remote_tb: str, object_id: int
) -> TaskError | None:
    """A TaskError that is also ``type(original)``, so ``except ValueError`` still works."""
    cls = type(original)
    dual = _DUAL.get(cls)
    if dual is None:
        try:
            dual = type(f"TaskError[{cls.__qualname__}]", (TaskError, cls), {})
        except TypeError:
            return None  # incompatible layouts (some C exception types)
        _DUAL[cls] = dual
    try:
        error = dual.__new__(dual)
        error.args = original.args
        # Not TaskError.__init__: through the MRO it would call the user's __init__.
        error.__dict__.update(getattr(original, "__dict__", {}))
        error.message = summary
        error.type_name = type_name
        error.remote_traceback = remote_tb
        error.object_id = object_id
    except Exception:
        return None
    return error
