"""The driver's side of the joblib backend: large arguments stored once (`Shared`), and the
batches in flight (`Job`), whose results one thread collects (`Collector`)."""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from .._api.objects import put
from .._api.ref import ObjectRef
from .batch import Call, pack, unpack_results

__all__ = ["Collector", "Job", "Shared", "nbytes"]

#: Types never worth measuring: the fast path for the many small arguments of a batch.
_SMALL: Final = frozenset({int, float, str, bool, type(None), complex, range, slice})

_log = logging.getLogger("dista.joblib")


def nbytes(value: object) -> int:
    """How many bytes ``value`` holds, for the kinds worth sharing (NumPy arrays, pandas
    frames and series, SciPy sparse matrices, bytes); 0 for the rest. Only modules already
    imported are asked: an argument of their types implies them."""
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray):
        return int(value.nbytes)
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(value, (pandas.DataFrame, pandas.Series)):
        usage = value.memory_usage(index=True, deep=False)
        return int(usage.sum()) if isinstance(value, pandas.DataFrame) else int(usage)
    sparse = sys.modules.get("scipy.sparse")
    if sparse is not None and sparse.issparse(value):
        parts = ("data", "indices", "indptr", "row", "col", "offsets")
        return sum(int(getattr(getattr(value, p, None), "nbytes", 0)) for p in parts)
    return 0


class Shared:
    """The large arguments of one ``Parallel`` call, each `dista.put` once: by ``id()``,
    with the object itself kept alive (as joblib's dask backend keys its scattered data),
    so that an id is never another object's while the entry lives. Cleared when the call
    ends: a task already queued keeps its inputs alive in the cluster, and nothing
    outlives the call, as loky's memmaps do not."""

    def __init__(self, above: int | None) -> None:
        #: None: nothing is shared (``max_nbytes=None``, as it turns loky's memmaps off).
        self.above = above
        self._lock = threading.Lock()
        self._refs: dict[int, tuple[object, ObjectRef[Any]]] = {}

    def batch(self, items: list[Call]) -> tuple[bytes, list[ObjectRef[Any]]]:
        """A batch's calls as `run` takes them: their pickle, large arguments (positional
        or keyword, at the top level, as joblib's dask backend looks for them) as refs,
        and those refs, whose values the worker gets."""
        used: dict[int, ObjectRef[Any]] = {}
        one = partial(self._one, used)
        calls = [
            (f, tuple(map(one, args)), {name: one(v) for name, v in kw.items()} if kw else kw)
            for f, args, kw in items
        ]
        data, oids = pack(calls)
        return data, [used[oid] for oid in oids]

    def _one(self, used: dict[int, ObjectRef[Any]], value: object) -> object:
        above = self.above
        if above is None or type(value) in _SMALL or nbytes(value) < above:
            return value
        key = id(value)
        with self._lock:  # one put per object, whichever thread dispatches
            found = self._refs.get(key)
            if found is not None and found[0] is value:
                ref = found[1]
            else:
                ref = put(value)
                self._refs[key] = (value, ref)
        used[ref.object_id] = ref
        return ref

    def clear(self) -> None:
        with self._lock:
            self._refs.clear()


class Job:
    """One batch's task, as joblib tracks it: what the backend's ``submit`` returns and the
    completion callback is given back. A batch that could not be sent (an argument that
    does not pickle, a closed session) is a job that failed already: it goes through the
    collector as any other, since joblib learns of failures only through the callback."""

    __slots__ = ("aborted", "callback", "error", "ref", "value")

    def __init__(self, ref: ObjectRef[Any] | None, callback: Callable[[Job], object]) -> None:
        self.ref = ref
        self.callback: Callable[[Job], object] = callback
        self.aborted: bool = False
        self.value: list[Any] = []
        self.error: BaseException | None = None

    def settle(self) -> None:
        """Read the result (blocking: on the collector thread, never the loop's)."""
        ref, self.ref = self.ref, None  # released once read: the worker frees it
        if ref is None:
            return  # failed before it was sent
        try:
            self.value = unpack_results(ref.get())
        except Exception as e:  # noqa: BLE001  (the batch's, or a lost worker, a cancel)
            # Not this frame's traceback: its frames hold the ref, which would keep the
            # object in the cluster for as long as the error lives (the task's own
            # traceback is in the error's text, or its cause).
            self.error = e.with_traceback(None)

    def result(self) -> list[Any]:
        if self.error is not None:
            raise self.error
        return self.value


class Collector:
    """The one thread (per process) that reads finished batches and runs joblib's
    callbacks. The event loop only queues the job (it must never block, nor decode a large
    result); joblib's callback dispatches the next batch, which pickles and may put."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, job: Job) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dista-joblib", daemon=True)
                self._thread.start()
        ref = job.ref
        # fetch=True: once the result is located, its value is brought here at once, so
        # that the read in `Job.settle` rarely waits.
        waiting = ref is not None and ref._session.on_done(
            ref.object_id, partial(self._queue.put, job), fetch=True
        )
        if not waiting:
            self._queue.put(job)  # done already

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job.aborted:  # joblib will not read it: let it go unread
                job.ref = None
            else:
                job.settle()
                try:
                    job.callback(job)
                except Exception:  # noqa: BLE001  (joblib's: say it, serve the other calls)
                    _log.exception("a joblib completion callback failed")
            del job  # not kept until the next one: it may hold a ref
