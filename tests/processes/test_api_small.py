"""Small API points on a real local cluster: `wait`'s count, `get`'s timeout message, the
awaitable `stats_async`/`timeline_async` (and the blocking forms refusing the loop that
would answer them), and tasks that end by a BaseException."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

import dista_runtime as dista
from dista_runtime._session import context as _context
from tests.support import tasks

T = TypeVar("T")


def on_dista_loop(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on the loop that runs this driver's Dista session."""
    loop: asyncio.AbstractEventLoop = _context.session().session.io.loop  # type: ignore[attr-defined]
    return asyncio.run_coroutine_threadsafe(make(), loop).result(30)


def test_wait_returns_at_most_num_returns(cluster: dista.Cluster) -> None:
    refs = [tasks.add.remote(i, 0) for i in range(6)]
    assert dista.get(refs, timeout=30) == list(range(6))
    done, pending = dista.wait(refs, num_returns=2, timeout=10)
    assert done == refs[:2] and pending == refs[2:]
    assert dista.wait(refs, num_returns=0) == ([], refs)
    done, pending = dista.wait(refs, num_returns=6)
    assert done == refs and pending == []
    # The first done in the order given; a slow one stays behind, in its place.
    slow = tasks.sleep_then.remote(1.0, 9)
    mixed = [refs[0], slow, refs[1], refs[2]]
    done, pending = dista.wait(mixed, num_returns=2, timeout=10)
    assert done == [refs[0], refs[1]] and pending == [slow, refs[2]]
    done, pending = dista.wait([slow], num_returns=1, timeout=0.05)
    assert (done, pending) == ([], [slow])
    assert slow.get(timeout=30) == 9


def test_get_timeout_names_the_timeout(cluster: dista.Cluster) -> None:
    slow = tasks.sleep_then.remote(1.5, 1)
    started = time.monotonic()
    with pytest.raises(dista.GetTimeoutError, match=r"1 of 1 objects were not ready within 1 s"):
        dista.get([slow], timeout=1)
    assert 0.9 < time.monotonic() - started < 5
    with pytest.raises(dista.GetTimeoutError, match=r"not ready within 0\.2 s"):
        slow.get(timeout=0.2)
    assert dista.get([slow], timeout=30) == [1]


def test_stats_and_timeline_on_the_sessions_loop(cluster: dista.Cluster) -> None:
    dista.get([tasks.add.remote(1, 1)], timeout=30)

    async def inside() -> tuple[dista.HeadStats, list[dista.TimelineRecord]]:
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=r"await dista\.stats_async\(\)"):
            dista.stats()
        with pytest.raises(RuntimeError, match=r"await dista\.timeline_async\(\)"):
            dista.timeline()
        assert time.monotonic() - started < 1  # at once, not after the request's timeout
        return await dista.stats_async(), await dista.timeline_async()

    stats, records = on_dista_loop(inside)
    assert stats.workers == 2
    assert records and all(r.submitted <= r.settled for r in records)


def test_async_forms_from_any_loop(cluster: dista.Cluster) -> None:
    async def main() -> tuple[dista.HeadStats, dista.HeadStats, list[dista.TimelineRecord]]:
        await tasks.add.remote(1, 2)
        # On a loop of its own, the blocking form only blocks that loop a moment.
        return await dista.stats_async(timeout=10), dista.stats(), await dista.timeline_async()

    first, second, records = asyncio.run(main())
    assert first.workers == second.workers == 2
    assert isinstance(records, list)


def test_tasks_ending_by_base_exceptions(cluster: dista.Cluster) -> None:
    @dista.task
    def leave(code: int | None) -> int:
        sys.exit(code)

    @dista.task
    def interrupted() -> int:
        raise KeyboardInterrupt

    with pytest.raises(dista.TaskError) as caught:
        leave.remote(2).get(timeout=30)
    assert type(caught.value) is dista.TaskError  # not a SystemExit: the driver goes on
    assert str(caught.value).startswith("SystemExit: the task called sys.exit(2)")
    with pytest.raises(dista.TaskError, match=r"^SystemExit: the task called sys\.exit\(\)"):
        leave.remote(None).get(timeout=30)
    with pytest.raises(dista.TaskError, match=r"^KeyboardInterrupt: the task was interrupted"):
        interrupted.remote().get(timeout=30)
    # The workers are still there.
    assert dista.get([tasks.add.remote(i, 1) for i in range(4)], timeout=30) == [1, 2, 3, 4]
    assert dista.stats().workers == 2
