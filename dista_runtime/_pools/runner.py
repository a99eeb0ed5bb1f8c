"""What `Executor` and `Pool` share: sending calls and chunks, and the futures in flight.

Every future a runner made is kept until it is done, so that shutting down can wait for
them all or cancel them all, whichever the interface asks for.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from .._api.calls import remote_call
from .._api.ref import ObjectRef
from .._values.codec import dumps
from .futures import DistaFuture, track
from .lease import Lease
from .remote import Setup, call_task

__all__ = ["Runner", "batched"]


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of ``size`` items (the last may be shorter), as `itertools.batched` (3.12)."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _pickled(chunk: list[Any]) -> bytes | list[Any]:
    """The chunk as one pickle, if it pickles on its own: a task's arguments are pickled
    looking for refs in every object (a chunk of small items costs twice as much that way,
    and that is most of a tiny map's time); with a ref among its items, the chunk itself."""
    try:
        return dumps(chunk)
    except Exception:  # noqa: BLE001  (a ref, or what remote_call reports better)
        return chunk


class Runner:
    def __init__(self, lease: Lease, setup: Setup | None) -> None:
        self.lease = lease
        self.setup = setup
        self._lock = threading.Lock()
        self._pending: set[DistaFuture[Any]] = set()

    def call(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        armed: bool = True,
    ) -> DistaFuture[Any]:
        """``fn(*args, **kwargs)`` as one task (after the pool's initializer, if any)."""
        task = fn if self.setup is None else call_task(fn, self.setup)
        return self._track(remote_call(task, args, kwargs), armed)

    def chunk(
        self, task: Callable[..., Any], chunk: list[Any], armed: bool = True
    ) -> DistaFuture[Any]:
        """A chunk of calls as one task (``task``: `chunk_task`); its result is the list of
        their results (``armed``: `track`)."""
        return self._track(remote_call(task, (_pickled(chunk),)), armed)

    def _track(self, ref: ObjectRef[Any], armed: bool = True) -> DistaFuture[Any]:
        future = track(ref, armed)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._discard)
        return future

    def _discard(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def pending(self) -> list[DistaFuture[Any]]:
        with self._lock:
            return list(self._pending)

    def cancel_all(self) -> None:
        for future in self.pending():
            future.cancel()

    def wait_all(self) -> None:
        """Until every future made so far is done (submitting has stopped by now)."""
        while pending := self.pending():
            for future in pending:
                future.arm()  # a map's, whose iterator may never read it
            concurrent.futures.wait(pending)

    def finish(self) -> None:
        """Wait for every future, then let go of the cluster (maybe stopping it)."""
        self.wait_all()
        self.lease.release()
