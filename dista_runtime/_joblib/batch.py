"""What a worker runs for the joblib backend: one of joblib's batches, as one task.

A batch travels as its own pickle, made in band (`pack`): every array in it comes out of
that pickle as a fresh, writable copy, as it does from loky's pipe, where a task's
arguments would otherwise be read-only views of the buffer the task arrived in (Dista maps
large values rather than copying them). Only the arguments the driver stored once (`refs`:
large ones, joblib's ``max_nbytes`` and up) arrive mapped, read-only, as loky's memmaps do.
The results go back the same way (a pickle in a pickle), so that ``Parallel`` returns
arrays its caller may write to, as loky's callers can.

The module is imported by name on the worker: `run` is pickled by reference, so nothing is
registered and the driver's registry hash never changes.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from joblib import parallel_config
from joblib.parallel import SequentialBackend

from .._api.ref import ObjectRef
from .._values.codec import _dumps, dumps
from .._values.errors import _pickle_exception, _revive, remote_traceback
from .._values.names import LABEL_ATTRIBUTE

__all__ = ["Call", "Failed", "RemoteTraceback", "pack", "run", "unpack_results"]

#: One call of a batch: joblib's ``(function, args, kwargs)``.
Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def pack(calls: list[Call]) -> tuple[bytes, list[int]]:
    """``calls`` as one pickle with every buffer in band, and the object IDs of the refs
    found in them (each pickled as its index in that list, which `run` gets as values)."""
    return _dumps(calls, None, ObjectRef)


class _Loader(pickle.Unpickler):
    """`pack`'s pickle, each ref's index replaced by the ref's value."""

    def __init__(self, data: bytes, values: Sequence[object]) -> None:
        super().__init__(io.BytesIO(data))
        self.values = values

    def persistent_load(self, pid: Any) -> object:
        return self.values[pid]


class RemoteTraceback(Exception):
    """The ``__cause__`` of an exception raised in a task: the task's traceback, as text
    (loky's ``_RemoteTraceback`` plays this part; the text cannot be a real traceback)."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


class Failed:
    """What a batch returns when one of its calls raised an `Exception`: the exception,
    pickled as Dista pickles a task's (`dista_runtime._values.errors`: by its class, args and
    attributes when plain pickle would not bring it back, as for an ``__init__`` that takes
    other arguments than its ``args``), so that ``Parallel`` raises the very type, as loky
    does, rather than a `TaskError` that is also one; and its traceback, as text."""

    __slots__ = ("error", "traceback")

    def __init__(self, error: bytes, traceback: str) -> None:
        self.error = error
        self.traceback = traceback

    def __reduce__(self) -> tuple[object, ...]:
        return (Failed, (self.error, self.traceback))

    def exception(self) -> BaseException:
        error = _revive(pickle.loads(self.error))
        error.__cause__ = RemoteTraceback(self.traceback.rstrip())
        return error


def _failed(error: Exception) -> Failed | None:
    """``error`` as a result, or None if it would not come back (it does not pickle, nor
    load again): then the task raises it and Dista's own error path says what it was."""
    blob = _pickle_exception(error)
    return None if blob is None else Failed(blob, remote_traceback(error))


@contextlib.contextmanager
def _threads(limit: int | None) -> Iterator[None]:
    """Native thread pools (BLAS, OpenMP) limited to ``limit`` threads while a batch runs:
    a worker is one of the cluster's slots, so a task that spread over every core would
    compete with its neighbours' (loky sets ``OMP_NUM_THREADS`` and the like in its
    workers for the same reason; a cluster's workers are already running, so the limit
    is set around each batch, through threadpoolctl, which scikit-learn depends on)."""
    if limit is None:
        yield
        return
    try:
        threadpoolctl = importlib.import_module("threadpoolctl")  # untyped: Any
    except ImportError:
        yield
        return
    with threadpoolctl.threadpool_limits(limits=limit):
        yield


def run(batch: bytes, values: list[object], nesting_level: int, threads: int | None) -> object:
    """A batch, on a worker: each call of `pack`'s pickle in order, nested ``Parallel``
    calls sequential (the task already holds one of the cluster's slots). Returns the
    results pickled (`unpack_results` reads them), or a `Failed` for the first call
    that raised."""
    calls: list[Call] = _Loader(batch, values).load()
    nested = SequentialBackend(nesting_level=nesting_level + 1)
    with parallel_config(backend=nested), _threads(threads):
        try:
            results = [function(*args, **kwargs) for function, args, kwargs in calls]
        except Exception as error:
            failed = _failed(error)
            if failed is None:
                raise
            return failed
    return dumps(results)


# What a dashboard calls these tasks (`dista_runtime._values.names`): a batch may hold
# calls of several functions, all run by this one.
setattr(run, LABEL_ATTRIBUTE, "joblib.Parallel batch")


def unpack_results(out: object) -> list[Any]:
    """What `run` returned, as the batch's results (raises what the batch raised)."""
    if isinstance(out, Failed):
        raise out.exception()
    assert isinstance(out, bytes), type(out)
    results: list[Any] = pickle.loads(out)
    return results
