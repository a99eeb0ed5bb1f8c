"""`dista.Executor` as a `ProcessPoolExecutor` user sees it: values, order, errors, laziness,
timeouts, cancelling (the remote task really stops), the `concurrent.futures` and asyncio
helpers, shutdown, initializer; and a script with its own cluster that leaves no process.

The module shares one local cluster (the ``cluster`` fixture): ``Executor()`` runs on the
cluster the process joined. The script test starts one of its own, as a user's does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import operator
import os
import textwrap
import threading
import time
from pathlib import Path

import pytest

import dista_runtime as dista
from tests.processes.support.pools import pause, run_script, spin, square, stopped_growing, tick

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


class Odd(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def even_only(x: int) -> int:
    if x % 2:
        raise Odd(f"odd {x}", x)
    return x


def set_marker(path: str) -> None:
    with open(os.path.join(path, f"init-{os.getpid()}"), "a") as f:
        f.write("x")
    os.environ["DISTA_TEST_EXECUTOR_INIT"] = path


def marker_and_pid(_: object) -> tuple[str | None, int]:
    return os.environ.get("DISTA_TEST_EXECUTOR_INIT"), os.getpid()


@pytest.fixture(scope="module")
def ex(cluster: dista.Cluster) -> object:
    with dista.Executor() as executor:
        yield executor


def wait_for(what: str, condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def running_tasks() -> int:
    return dista.stats().running


def ticking(paths: list[Path]) -> None:
    wait_for("the tasks started", lambda: all(p.exists() for p in paths))


def test_submit_gives_standard_futures_of_any_callable(ex: dista.Executor) -> None:
    k = 5
    futures = [
        ex.submit(square, 7),
        ex.submit(lambda x: x + k, 1),  # a closure: by value
        ex.submit(functools.partial(operator.mul, 6), 7),
        ex.submit(pow, 2, 10),
        ex.submit(sorted, [3, 1, 2], reverse=True),
    ]
    assert all(isinstance(f, cf.Future) for f in futures)
    assert [f.result(timeout=30) for f in futures] == [49, 6, 42, 1024, [3, 2, 1]]
    assert all(f.done() and not f.cancelled() for f in futures)


def test_a_function_defined_here_travels_by_value(ex: dista.Executor) -> None:
    def local(x: int) -> str:
        return f"local {x} in {os.getpid()}"

    text = ex.submit(local, 3).result(timeout=30)
    assert text.startswith("local 3 in ") and int(text.split()[-1]) != os.getpid()


def test_a_chunked_by_value_function_shows_its_lines(ex: dista.Executor) -> None:
    def check(x: int) -> int:
        assert x < 5, "too big"  # the line a user must see
        return x

    with pytest.raises(AssertionError) as caught:
        list(ex.map(check, range(8), chunksize=3))
    assert "# the line a user must see" in caught.value.remote_traceback  # type: ignore[attr-defined]


@pytest.mark.parametrize("chunksize", [1, 3, 100])
def test_map_keeps_the_order(ex: dista.Executor, chunksize: int) -> None:
    assert list(ex.map(square, range(250), chunksize=chunksize)) == [x * x for x in range(250)]
    # several iterables, the shortest deciding, as zip; a lambda
    pairs = ex.map(lambda a, b: a - b, range(10), [5] * 7, chunksize=chunksize)
    assert list(pairs) == [a - 5 for a in range(7)]
    assert list(ex.map(square, [], chunksize=chunksize)) == []


def test_map_reads_its_input_at_once_and_yields_lazily(ex: dista.Executor) -> None:
    read = []

    def items() -> object:
        for x in (0.0, 0.0, 3.0):
            read.append(x)
            yield x

    start = time.monotonic()
    results = ex.map(spin, items())  # type: ignore[arg-type]
    assert read == [0.0, 0.0, 3.0]  # submitted eagerly, as ProcessPoolExecutor.map
    assert next(results) == 0.0 and next(results) == 0.0
    assert time.monotonic() - start < 2.5  # the first values before the last is done
    results.close()  # leaving early cancels the call not read
    wait_for("the cancelled call stopped", lambda: running_tasks() == 0, timeout=2.5)


def test_map_timeout_counts_from_the_call_and_cancels_the_rest(ex: dista.Executor) -> None:
    results = ex.map(spin, [0.0, 30.0, 30.0], timeout=1.0)
    time.sleep(0.5)
    assert next(results) == 0.0
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        next(results)
    assert time.monotonic() - start < 1.0  # half a second left, not a fresh second
    wait_for("the timed-out calls were cancelled", lambda: running_tasks() == 0, timeout=5)


def test_map_rejects_a_bad_chunksize(ex: dista.Executor) -> None:
    with pytest.raises(ValueError, match="chunksize"):
        ex.map(square, [1], chunksize=0)


def test_a_task_error_is_the_original_type(ex: dista.Executor) -> None:
    future = ex.submit(even_only, 3)
    error = future.exception(timeout=30)
    assert isinstance(error, Odd) and isinstance(error, dista.TaskError)
    assert error.code == 3 and error.args == ("odd 3",)
    assert 'raise Odd(f"odd {x}", x)' in error.remote_traceback
    with pytest.raises(Odd, match="odd 3"):
        future.result()
    # map raises at the failing chunk's place, after the values before it; the chunk's
    # other values (4) are lost with it, as with ProcessPoolExecutor
    results = ex.map(even_only, [0, 2, 4, 5, 6], chunksize=2)
    assert [next(results), next(results)] == [0, 2]
    with pytest.raises(Odd):
        next(results)
    with pytest.raises(StopIteration):  # and the iteration is over
        next(results)


def test_cancel_stops_a_running_task(ex: dista.Executor, tmp_path: Path) -> None:
    paths = [tmp_path / "a", tmp_path / "b"]
    futures = [ex.submit(tick, str(p), 60.0) for p in paths]  # both workers busy
    ticking(paths)
    assert [f.cancel() for f in futures] == [True, True]
    done, not_done = cf.wait(futures, timeout=1)
    assert done == set(futures) and not not_done and all(f.cancelled() for f in futures)
    with pytest.raises(cf.CancelledError):
        futures[0].result()
    assert stopped_growing(paths)  # the remote loops were interrupted
    start = time.monotonic()
    assert ex.submit(square, 3).result(timeout=10) == 9  # the workers are free again
    assert time.monotonic() - start < 5


def test_cancel_after_done_is_refused(ex: dista.Executor) -> None:
    future = ex.submit(square, 2)
    assert future.result(timeout=30) == 4
    assert future.cancel() is False and not future.cancelled()


def test_as_completed_wait_and_done_callbacks(ex: dista.Executor) -> None:
    slow, fast = ex.submit(pause, 1.0), ex.submit(pause, 0.0)
    assert next(cf.as_completed([slow, fast], timeout=30)) is fast
    done, _ = cf.wait([slow, fast], return_when=cf.FIRST_COMPLETED, timeout=30)
    assert fast in done
    called = threading.Event()
    seen = []

    def on_done(f: cf.Future[float]) -> None:
        seen.append(f)
        called.set()

    slow.add_done_callback(on_done)
    assert called.wait(10) and seen == [slow] and slow.result() == 1.0
    late = []
    slow.add_done_callback(late.append)  # already done: called at once, here
    assert late == [slow]
    failing = ex.submit(even_only, 1)
    done, _ = cf.wait([failing], return_when=cf.FIRST_EXCEPTION, timeout=30)
    assert done == {failing}


def test_asyncio_run_in_executor_and_wrap_future(ex: dista.Executor, tmp_path: Path) -> None:
    path = tmp_path / "tick"

    async def main() -> tuple[int, int, bool]:
        loop = asyncio.get_running_loop()
        a = await loop.run_in_executor(ex, square, 12)
        b = await asyncio.wrap_future(ex.submit(pow, 3, 3))
        future = ex.submit(tick, str(path), 60.0)
        wrapped = asyncio.wrap_future(future)
        while not path.exists():
            await asyncio.sleep(0.02)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(wrapped, 0.2)  # cancels the asyncio future...
        return a, b, future.cancelled()  # ...and through it the task

    assert asyncio.run(main()) == (144, 27, True)
    assert stopped_growing([path])


def test_shutdown_waits_then_refuses(cluster: dista.Cluster) -> None:
    executor = dista.Executor(cluster=cluster)
    futures = [executor.submit(pause, 0.5) for _ in range(3)]
    unread = executor.map(pause, [0.3] * 4, chunksize=2)
    unread_one_by_one = executor.map(pause, [0.2] * 3)
    executor.shutdown(wait=True)
    assert all(f.done() and f.result() == 0.5 for f in futures)
    assert dista.stats().running == 0  # the maps' calls are done too, nobody read them
    assert list(unread) == [0.3] * 4 and list(unread_one_by_one) == [0.2] * 3
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(square, 1)
    executor.shutdown()  # twice is fine
    assert dista.stats().workers == 2  # a cluster it did not start keeps running


def test_shutdown_cancel_futures(cluster: dista.Cluster, tmp_path: Path) -> None:
    executor = dista.Executor()
    paths = [tmp_path / "a", tmp_path / "b"]
    running = [executor.submit(tick, str(p), 60.0) for p in paths]
    ticking(paths)
    queued = [executor.submit(square, x) for x in range(5)]
    start = time.monotonic()
    executor.shutdown(wait=True, cancel_futures=True)
    assert time.monotonic() - start < 5
    # Unfinished calls are cancelled, running ones too (ProcessPoolExecutor lets those run).
    assert all(f.cancelled() for f in running)
    assert all(f.cancelled() or f.result() == x * x for x, f in enumerate(queued))
    assert stopped_growing(paths)


def test_shutdown_cancels_a_map_being_read(cluster: dista.Cluster) -> None:
    executor = dista.Executor()
    results = executor.map(spin, [0.0, 30.0], chunksize=1)
    assert next(results) == 0.0
    threading.Timer(0.3, executor.shutdown, kwargs={"cancel_futures": True}).start()
    start = time.monotonic()
    with pytest.raises(cf.CancelledError):
        next(results)  # blocked reading the 30 s call when the shutdown cancels it
    assert time.monotonic() - start < 5
    wait_for("the call was stopped", lambda: running_tasks() == 0, timeout=5)


def test_shutdown_without_waiting(cluster: dista.Cluster) -> None:
    executor = dista.Executor()
    future = executor.submit(pause, 0.5)
    start = time.monotonic()
    executor.shutdown(wait=False)
    assert time.monotonic() - start < 0.3
    assert future.result(timeout=10) == 0.5  # the call still ran


def test_an_address_must_be_the_joined_clusters(cluster: dista.Cluster) -> None:
    with dista.Executor(cluster.address) as executor:
        assert executor.submit(square, 4).result(timeout=30) == 16
    with pytest.raises(dista.DistaError, match="joined to the cluster at"):
        dista.Executor("127.0.0.1:1")
    assert dista.stats().workers == 2


def test_initializer_runs_once_per_worker_before_its_tasks(
    cluster: dista.Cluster, tmp_path: Path
) -> None:
    with dista.Executor(initializer=set_marker, initargs=(str(tmp_path),)) as executor:
        seen = list(executor.map(marker_and_pid, range(40), chunksize=2))
        seen += [executor.submit(marker_and_pid, 0).result(timeout=30) for _ in range(6)]
    assert {marker for marker, _ in seen} == {str(tmp_path)}
    pids = {pid for _, pid in seen}
    files = sorted(tmp_path.glob("init-*"))
    assert {int(f.name.split("-")[1]) for f in files} == pids
    assert all(f.read_text() == "x" for f in files)  # once in each


def test_arguments_checked_like_the_standard_executors(cluster: dista.Cluster) -> None:
    with pytest.raises(ValueError, match="max_workers"):
        dista.Executor(max_workers=0)
    with pytest.raises(TypeError, match="initializer"):
        dista.Executor(initializer=3)  # type: ignore[arg-type]
    with pytest.warns(RuntimeWarning, match="max_tasks_per_child"):
        dista.Executor(max_tasks_per_child=5).shutdown()


SCRIPT = textwrap.dedent(
    """
    import os
    import sys

    import dista_runtime as dista
    from dista_runtime._session import context
    from tests.support.cluster import assert_gone


    class Bad(Exception):
        pass


    def double(x):
        return 2 * x


    def fail(x):
        raise Bad(f"bad {x}")


    if __name__ == "__main__":
        assert context.current() is None
        with dista.Executor(2) as ex:
            pids = dista.local_pids()
            assert len(pids) == 2, pids
            assert list(ex.map(double, range(10), chunksize=3)) == [2 * x for x in range(10)]
            assert ex.submit(lambda: os.getpid()).result(timeout=60) in pids
            try:
                ex.submit(fail, 1).result(timeout=60)
            except Bad as e:
                assert isinstance(e, dista.TaskError) and "raise Bad" in e.remote_traceback
                print("error ok")
        assert context.current() is None, "the executor's cluster is still joined"
        assert_gone(pids)
        print("gone", *pids)
    """
)


@pytest.mark.timeout(120)
def test_a_script_with_its_own_cluster_leaves_nothing(tmp_path: Path) -> None:
    done = run_script(tmp_path, SCRIPT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error ok" in done.stdout, done.stdout + done.stderr
    assert "gone" in done.stdout, done.stdout + done.stderr
