"""The module-level API on refs: `get`, `wait`, `as_completed`, `stats`, `timeline`."""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import dista_proto as dp

from . import _context, _session
from ._errors import GetTimeoutError
from ._progress import Progress
from ._ref import ObjectRef

__all__ = [
    "as_completed",
    "get",
    "stats",
    "timeline",
    "wait",
]

T = TypeVar("T")


@overload
def get(refs: ObjectRef[T], *, timeout: float | None = None) -> T: ...
@overload
def get(refs: Sequence[ObjectRef[T]], *, timeout: float | None = None) -> list[T]: ...
def get(refs: ObjectRef[Any] | Sequence[ObjectRef[Any]], *, timeout: float | None = None) -> Any:
    """The value of one ref, or the values of many in order (a progress line if slow)."""
    if isinstance(refs, ObjectRef):
        return refs.get(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    with Progress(len(refs), "dista: get", stream=sys.stderr) as progress:
        _wait_all(refs, deadline, progress)
        values: list[Any] = []
        for ref in refs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            values.append(ref.get(left))
    return values


def _wait_all(refs: Sequence[ObjectRef[Any]], deadline: float | None, progress: Progress) -> None:
    """Until every ref has an answer: one wake-up for the lot, not one per ref."""
    lock = threading.Lock()
    left = [1]  # 1 until every callback is registered, so an early answer can't finish us
    event = threading.Event()

    def one() -> None:
        with lock:
            left[0] -= 1
            if left[0] == 0:
                event.set()

    for ref in refs:
        if ref._session.on_done(ref.object_id, one):
            with lock:
                left[0] += 1
    one()
    total = len(refs)
    with _session.on_block():  # in a task: lend this thread's slot while we wait
        while not event.wait(0.1):
            progress.update(total - left[0])
            if deadline is not None and time.monotonic() >= deadline:
                return  # the per-ref reads below raise GetTimeoutError naming one
    progress.update(total)


def wait(
    refs: Sequence[ObjectRef[T]], num_returns: int = 1, timeout: float | None = None
) -> tuple[list[ObjectRef[T]], list[ObjectRef[T]]]:
    """Wait until ``num_returns`` of ``refs`` are done (value, failure or stored on a
    worker) or ``timeout`` passes: (done, not done), each in the order given."""
    if not 0 <= num_returns <= len(refs):
        raise ValueError(f"num_returns must be in [0, {len(refs)}], not {num_returns}")
    arrived: queue.SimpleQueue[None] = queue.SimpleQueue()
    count = 0
    for ref in refs:
        if not ref._session.on_done(ref.object_id, lambda: arrived.put(None)):
            count += 1
    deadline = None if timeout is None else time.monotonic() + timeout
    while count < num_returns:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        try:
            arrived.get(timeout=left)
        except queue.Empty:
            break
        count += 1
    done = [r for r in refs if r.done()]
    done_set = {r.object_id for r in done}
    return done, [r for r in refs if r.object_id not in done_set]


def as_completed(
    refs: Sequence[ObjectRef[T]], timeout: float | None = None
) -> Iterator[ObjectRef[T]]:
    """Yield ``refs`` as they complete; `GetTimeoutError` if ``timeout`` passes first."""
    arrived: queue.SimpleQueue[ObjectRef[T]] = queue.SimpleQueue()
    waiting = 0
    for ref in refs:
        if ref._session.on_done(ref.object_id, lambda r=ref: arrived.put(r)):  # type: ignore[misc]
            waiting += 1
        else:
            arrived.put(ref)
            waiting += 1
    deadline = None if timeout is None else time.monotonic() + timeout
    for _ in range(waiting):
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            yield arrived.get(timeout=left)
        except queue.Empty:
            raise GetTimeoutError(f"refs still pending after {timeout} s") from None


def stats(timeout: float | None = 10.0) -> dp.HeadStats:
    """The head's counts: objects, held bytes, pending and running tasks, workers."""
    result: dp.HeadStats = _context.session().session.request("stats", timeout)
    return result


def timeline(timeout: float | None = 10.0) -> list[dp.TimelineRecord]:
    """This driver's finished tasks since the last call (the head hands them over once)."""
    records: tuple[dp.TimelineRecord, ...] = _context.session().session.request(
        "timeline", timeout
    )
    return list(records)
