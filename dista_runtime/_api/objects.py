"""The module-level API on refs: `put`, `get`, `wait`, `as_completed`, `stats`, `timeline`."""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar, overload

import dista_proto as dp

from .._errors import GetTimeoutError
from .._session import context as _context
from .._values.codec import encode
from .._values.ids import PUT_NAME, task_id
from .progress import Progress
from .ref import ObjectRef

__all__ = [
    "as_completed",
    "get",
    "put",
    "stats",
    "stats_async",
    "timeline",
    "timeline_async",
    "wait",
]

T = TypeVar("T")

_PUT_TASK = task_id(PUT_NAME)


def put(value: T) -> ObjectRef[T]:
    """Store ``value`` in the cluster once; tasks given the ref read it there.

    The value crosses from this process once, to a worker, which keeps it (a small one, up
    to 64 KiB, goes on to the head) until its last ref is released. Pass the ref to any
    number of tasks, or `get` it. Refs cannot be stored inside the value: pass them to
    tasks directly. As with a task's result, if the worker holding the value is lost,
    reading the ref fails (put it again).
    """
    live = _context.session().session
    data = encode(value, "the value given to dista.put")
    return ObjectRef(live.submit(_PUT_TASK, data, (), 1), live)


@overload
def get(refs: ObjectRef[T], *, timeout: float | None = None) -> T: ...
@overload
def get(refs: Sequence[ObjectRef[T]], *, timeout: float | None = None) -> list[T]: ...
def get(refs: ObjectRef[Any] | Sequence[ObjectRef[Any]], *, timeout: float | None = None) -> Any:
    """The value of one ref, or the values of many in order (a progress line if slow)."""
    if isinstance(refs, ObjectRef):
        return refs.get(timeout)
    if not isinstance(refs, Sequence) or not all(isinstance(r, ObjectRef) for r in refs):
        raise TypeError(f"dista.get takes an ObjectRef or a list of them, not {_kinds(refs)}")
    deadline = None if timeout is None else time.monotonic() + timeout
    with Progress(len(refs), "dista: get", stream=sys.stderr) as progress:
        _wait_all(refs, deadline, progress)
        values: list[Any] = []
        for ref in refs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                values.append(ref.get(left))
            except GetTimeoutError:
                raise GetTimeoutError(_not_ready(refs, timeout)) from None
    return values


def _kinds(refs: object) -> str:
    if not isinstance(refs, Sequence) or isinstance(refs, str | bytes):
        return type(refs).__name__
    found = sorted({type(r).__name__ for r in refs if not isinstance(r, ObjectRef)})
    return f"a {type(refs).__name__} holding {', '.join(found)}"


def _not_ready(refs: Sequence[ObjectRef[Any]], timeout: float | None) -> str:
    late = [r for r in refs if not r.done()]
    if not late:  # all located, but a value was still on its way here
        return f"the values of {len(refs)} objects did not all arrive within {timeout} s"
    return (
        f"{len(late)} of {len(refs)} objects were not ready within {timeout} s "
        f"(the first: {late[0]!r})"
    )


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
        if ref._session.on_done(ref.object_id, one, fetch=True):  # (all read next)
            with lock:
                left[0] += 1
    one()
    total = len(refs)
    blocking = refs[0]._session.blocking() if refs else contextlib.nullcontext()
    with blocking:  # in a task: lend this thread's slot while we wait
        while not event.wait(0.1):
            progress.update(total - left[0])
            if deadline is not None and time.monotonic() >= deadline:
                return  # the per-ref reads below raise GetTimeoutError naming one
    progress.update(total)


def wait(
    refs: Sequence[ObjectRef[T]],
    num_returns: int = 1,
    timeout: float | None = None,
    *,
    fetch_local: bool = False,
) -> tuple[list[ObjectRef[T]], list[ObjectRef[T]]]:
    """Wait until ``num_returns`` of ``refs`` are done (value, failure or stored on a
    worker) or ``timeout`` passes: (done, not done), each in the order given.

    As Ray's: done holds at most ``num_returns`` refs, the first done in the order given;
    every other ref is in not done, even one that finished meanwhile. Unlike Ray's, a
    result stored on a worker stays there until read (``fetch_local=True``: each is
    brought here as soon as it is done, as Ray's default does).
    """
    if not 0 <= num_returns <= len(refs):
        raise ValueError(f"num_returns must be in [0, {len(refs)}], not {num_returns}")
    arrived: queue.SimpleQueue[None] = queue.SimpleQueue()
    count = 0
    for ref in refs:
        if not ref._session.on_done(ref.object_id, lambda: arrived.put(None), fetch_local):
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
    done: list[ObjectRef[T]] = []
    pending: list[ObjectRef[T]] = []
    for ref in refs:
        if len(done) < num_returns and ref.done():
            done.append(ref)
        else:
            pending.append(ref)
    return done, pending


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
    """The head's counts: objects, held bytes, pending and running tasks, workers.

    Blocks; on the event loop that runs Dista (an ``async`` driver, an ``async def`` task)
    it raises RuntimeError: use ``await dista.stats_async()`` there.
    """
    result: dp.HeadStats = _context.session().session.request("stats", timeout)
    return result


async def stats_async(timeout: float | None = 10.0) -> dp.HeadStats:
    """`stats` for a coroutine: awaits the head's answer without blocking the loop."""
    result: dp.HeadStats = await _context.session().session.request_async("stats", timeout)
    return result


def timeline(timeout: float | None = 10.0) -> list[dp.TimelineRecord]:
    """This driver's finished tasks since the last call (the head hands them over once).

    Blocks; on the event loop that runs Dista it raises RuntimeError: use
    ``await dista.timeline_async()`` there.
    """
    records: tuple[dp.TimelineRecord, ...] = _context.session().session.request(
        "timeline", timeout
    )
    return list(records)


async def timeline_async(timeout: float | None = 10.0) -> list[dp.TimelineRecord]:
    """`timeline` for a coroutine: awaits the head's answer without blocking the loop."""
    records: tuple[dp.TimelineRecord, ...] = await _context.session().session.request_async(
        "timeline", timeout
    )
    return list(records)
