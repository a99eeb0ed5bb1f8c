"""A joblib backend: ``Parallel`` and scikit-learn's ``n_jobs`` on a Dista cluster.

    import joblib
    import dista_runtime.joblib  # registers the backend "dista"

    with joblib.parallel_config(backend="dista"):
        search = GridSearchCV(SVC(), grid, n_jobs=-1).fit(X, y)

joblib finds backends only through `joblib.register_parallel_backend` (it has no entry
points), so importing this module is what makes ``backend="dista"`` known; the older
``joblib.parallel_backend("dista")`` works as well.

Which cluster: the one this process joined (`dista.init`). If it joined none, the backend
joins one when first used (a ``Parallel`` call, ``joblib.effective_n_jobs(-1)``) with
``dista.init()``: the cluster at ``DISTA_ADDRESS`` when that is set, else a local cluster
(``parallel_config(backend="dista", workers=N)`` sets its size; default one worker per
core). That cluster is the process's, not one ``Parallel`` call's: starting worker
processes costs far more than most calls, so it stays for the next call and is shut down
at exit (or by `dista.shutdown()`), as any ``dista.init()`` cluster.

How a call runs: each batch joblib makes is one by-value task (`remote_call`, so nothing is
registered and the driver's registry hash never changes). Large arguments of the batch's
calls (NumPy arrays, pandas frames, SciPy sparse matrices, bytes) of joblib's ``max_nbytes``
or more (default 1 MiB, the size from which loky memory-maps an array; None: never) are
`dista.put` once per object and passed as refs: every task reads the one stored copy (a
worker on the same host maps it, read-only, as loky's memmaps are) instead of receiving its
own. The rest travels in the batch's own pickle, so a task gets writable copies, and the
results come back as writable copies too, as with loky (`dista_runtime._joblib.batch`).
Results are read off the event loop by one collector thread, which then runs joblib's
completion callback: that callback dispatches the next batch, which pickles and may put,
and must not stall the loop that carries every answer (`dista_runtime._joblib.jobs`).

What differs from loky (docs/joblib.md): the workers are the cluster's long-lived processes,
not spawned per call; ``n_jobs=-1`` is the number of worker processes connected; a nested
``Parallel`` inside a task runs sequentially (the cluster's slots are already the
parallelism); each task runs with its native thread pools limited to
``inner_max_num_threads`` threads (default 1: one task per worker per core).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from joblib import register_parallel_backend

# Where joblib tells third-party backends to import its classes from.
from joblib.parallel import (
    AutoBatchingMixin,
    FallbackToBackend,
    ParallelBackendBase,
    SequentialBackend,
    memstr_to_bytes,
)

from ._api.calls import remote_call
from ._api.cluster import init
from ._api.objects import stats
from ._joblib.batch import RemoteTraceback, run
from ._joblib.jobs import Collector, Job, Shared
from ._session import context as _context

__all__ = ["SHARE_ABOVE", "DistaBackend", "RemoteTraceback"]

#: Arguments this large or larger (bytes) are stored once and passed by reference, unless
#: the call says otherwise (joblib's ``max_nbytes``, whose default is this size too).
SHARE_ABOVE: Final = 1 << 20

_collector = Collector()
_start_lock = threading.Lock()


def _join(workers: int | None) -> None:
    """Join a cluster if this process has none (the module docstring says which)."""
    with _start_lock:
        current = _context.current()
        if current is not None and not current.session.closed:
            return
        if _context.auto_init is not None:  # under `dista run`: its cluster
            _context.session()
            return
        init(workers=workers)


class DistaBackend(AutoBatchingMixin, ParallelBackendBase):  # type: ignore[misc]
    """joblib's backend "dista": batches run as tasks on the cluster this process joined.

    Parameters (``parallel_config(backend="dista", ...)``): ``workers``, the size of the
    local cluster started when the process joined none; joblib's own
    ``inner_max_num_threads``, the native threads each task may use (default 1), and
    ``max_nbytes``, the size from which an argument is stored once and shared.
    """

    #: ``n_jobs=None`` under this backend means every worker, as for joblib's dask
    #: backend: scikit-learn's default ``n_jobs=None`` then uses the cluster.
    default_n_jobs = -1
    supports_retrieve_callback = True
    supports_inner_max_num_threads = True
    #: Tasks run in other processes: ``require="sharedmem"`` makes joblib use threads.
    uses_threads = False
    supports_sharedmem = False

    def __init__(
        self,
        nesting_level: int | None = None,
        inner_max_num_threads: int | None = None,
        *,
        workers: int | None = None,
    ) -> None:
        super().__init__(nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads)
        self.workers = workers
        self.shared: Shared = Shared(SHARE_ABOVE)
        self.parallel: Any = None
        self._lock = threading.Lock()
        self._jobs: set[Job] = set()

    def effective_n_jobs(self, n_jobs: int | None) -> int:
        """``n_jobs`` as given; a negative one counts back from the worker processes
        connected now (-1: all of them, -2: all but one), at least 1."""
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            n_jobs = self.default_n_jobs
        if n_jobs > 0:
            return n_jobs
        _join(self.workers)
        return max(stats().workers + 1 + n_jobs, 1)

    def configure(
        self,
        n_jobs: int = 1,
        parallel: Any = None,
        max_nbytes: int | str | None = SHARE_ABOVE,
        **backend_kwargs: object,
    ) -> int:
        """Join the cluster (the module docstring says which); ``n_jobs=1`` runs the calls
        here, one after another, as it does with every joblib backend. The other keywords
        are ``Parallel``'s settings for its backend (``temp_folder``, ``mmap_mode``...):
        loky's memmaps are not used here, so only ``max_nbytes`` matters."""
        if n_jobs == 1:
            raise FallbackToBackend(SequentialBackend(nesting_level=self.nesting_level))
        _join(self.workers)
        self.parallel = parallel
        self.shared.clear()
        self.shared.above = (
            memstr_to_bytes(max_nbytes) if isinstance(max_nbytes, str) else max_nbytes
        )
        return self.effective_n_jobs(n_jobs)

    def get_nested_backend(self) -> tuple[Any, int | None]:
        """Sequential: a task already holds one of the cluster's slots, and a nested call
        that waited for more slots could wait for its own (a deadlock with every slot
        taken by a waiting parent)."""
        return SequentialBackend(nesting_level=self._level() + 1), None

    def _level(self) -> int:
        return self.nesting_level or 0

    def submit(self, func: Any, callback: Callable[[Job], object] | None = None) -> Job:
        """Queue one batch as a task, its large arguments as refs (`Shared`). Never
        raises: joblib may call this from the completion callback, where an exception
        would be lost and ``Parallel`` would wait for ever, so a batch that cannot be
        sent is a job that failed, reported as any other."""
        threads = 1 if self.inner_max_num_threads is None else self.inner_max_num_threads
        job = Job(None, partial(self._done, callback))
        try:
            items = getattr(func, "items", None)  # joblib's batches have their calls there
            data, refs = self.shared.batch(items if items is not None else [(func, (), {})])
            job.ref = remote_call(run, (data, refs, self._level(), threads))
        except Exception as e:  # noqa: BLE001  (reported through the callback, as said)
            job.error = e
        with self._lock:
            self._jobs.add(job)
        _collector.watch(job)
        return job

    def _done(self, callback: Callable[[Job], object] | None, job: Job) -> None:
        with self._lock:
            self._jobs.discard(job)
        if callback is not None:
            callback(job)

    def retrieve_result_callback(self, out: Job) -> list[Any]:
        """The batch's results; raises what the task raised, as its own type."""
        return out.result()

    def abort_everything(self, ensure_ready: bool = True) -> None:
        """Cancel every batch still running: joblib will not read them (a call raised)."""
        with self._lock:
            jobs, self._jobs = self._jobs, set()
        for job in jobs:
            job.aborted = True
            ref = job.ref
            if ref is not None:
                with contextlib.suppress(Exception):  # finished meanwhile, session closed
                    ref.cancel()

    def terminate(self) -> None:
        """The call is over: its shared arguments may go (a queued task keeps its own)."""
        self.shared.clear()
        self.reset_batch_stats()


register_parallel_backend("dista", DistaBackend)
