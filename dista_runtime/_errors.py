"""The exceptions users see (how a task's exception crosses the wire is
`dista_runtime._values.errors`)."""

from __future__ import annotations

__all__ = [
    "AddressError",
    "CheckpointError",
    "DistaError",
    "GetTimeoutError",
    "TaskCancelledError",
    "TaskError",
]


class DistaError(Exception):
    """Base class of Dista's own errors."""


class AddressError(DistaError, ValueError):
    """A head address that is not ``HOST:PORT`` or ``unix:PATH`` (a ValueError too)."""


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


class CheckpointError(DistaError):
    """A checkpoint could not be written or read; the message says where and why."""
