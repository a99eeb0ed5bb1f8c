"""The exceptions users see, and how a task's exception crosses the wire.

An error frame carries text only. A worker sends ``"Type: message"``, the remote traceback,
and, when the exception pickles, a marker line and the pickled exception in base64; the
head passes the text on as is (wrapping it in "input ... failed: ..." for dependents). The
driver raises a `TaskError` that is also an instance of the original type where it can be.
"""

from __future__ import annotations

import base64
import pickle
import traceback
from typing import Final

__all__ = [
    "DistaError",
    "GetTimeoutError",
    "TaskCancelledError",
    "TaskError",
    "error_from_message",
    "message_from_exception",
]

_MARK: Final = "\n--- dista: pickled exception ---\n"


class DistaError(Exception):
    """Base class of Dista's own errors."""


class GetTimeoutError(DistaError, TimeoutError):
    """A `get` or `wait` ran out of time; the objects may still arrive."""


class TaskError(DistaError):
    """A task failed. ``type_name`` and ``remote_traceback`` say how, on the worker."""

    def __init__(
        self, message: str, type_name: str = "", remote_traceback: str = "", object_id: int = 0
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type_name = type_name
        self.remote_traceback = remote_traceback
        self.object_id = object_id

    def __str__(self) -> str:
        text = self.message
        if self.remote_traceback:
            text += "\n\nRemote traceback:\n" + self.remote_traceback.rstrip()
        return text

    def __reduce__(self) -> tuple[object, ...]:
        return (TaskError, (self.message, self.type_name, self.remote_traceback, self.object_id))


class TaskCancelledError(TaskError):
    """The object's task was cancelled before it produced it."""


def message_from_exception(error: BaseException) -> str:
    """What a worker puts in the error frame for a task that raised ``error``."""
    type_name = type(error).__qualname__
    module = type(error).__module__
    if module not in ("builtins", "__main__"):
        type_name = f"{module}.{type_name}"
    frames = traceback.format_exception(type(error), error, error.__traceback__)
    text = f"{type_name}: {error}\n{''.join(frames)}"
    try:
        blob = pickle.dumps(error, protocol=5)
        pickle.loads(blob)  # a type that pickles but does not unpickle is no use to the driver
    except Exception:
        return text
    return text + _MARK + base64.b64encode(blob).decode()


def error_from_message(message: str, object_id: int) -> TaskError:
    """The exception to raise for an object that failed with ``message``."""
    original: BaseException | None = None
    text, mark, blob = message.partition(_MARK)
    if mark:
        try:
            original = pickle.loads(base64.b64decode(blob))
        except Exception:
            original = None
    summary, _, remote_tb = text.partition("\n")
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
