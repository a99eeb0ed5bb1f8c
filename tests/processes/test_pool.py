"""`dista.Pool` as a `multiprocessing.Pool` user sees it: every call of its interface, their
results, callbacks and errors, the initializer, close/join/terminate; and a script moved
from multiprocessing by its import, whose ``with Pool()`` leaves no process behind.

The module shares one local cluster (the ``cluster`` fixture): ``Pool()`` runs on the cluster
the process joined. The script test starts one of its own, as a user's does.
"""

from __future__ import annotations

import itertools
import multiprocessing
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


def fail_on(x: int) -> int:
    if x == 3:
        raise KeyError(x)
    return x


def init_worker(path: str, token: str) -> None:
    with open(os.path.join(path, f"init-{os.getpid()}"), "a") as f:
        f.write("x")
    os.environ["DISTA_TEST_POOL_INIT"] = token


def token_and_pid(_: object) -> tuple[str | None, int]:
    return os.environ.get("DISTA_TEST_POOL_INIT"), os.getpid()


@pytest.fixture(scope="module")
def pool(cluster: dista.Cluster) -> object:
    with dista.Pool() as p:
        yield p


def wait_for_files(paths: list[Path]) -> None:
    deadline = time.monotonic() + 10
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, "the tasks did not start"
        time.sleep(0.02)


@pytest.mark.parametrize("chunksize", [None, 1, 7])
def test_map_and_starmap(pool: dista.Pool, chunksize: int | None) -> None:
    assert pool.map(square, range(100), chunksize) == [x * x for x in range(100)]
    assert pool.map(square, iter(range(5)), chunksize) == [0, 1, 4, 9, 16]  # any iterable
    assert pool.starmap(pow, [(2, 3), (3, 2), (10, 0)], chunksize) == [8, 9, 1]
    assert pool.map(square, [], chunksize) == []
    k = 3
    assert pool.map(lambda x: x + k, range(4), chunksize) == [3, 4, 5, 6]


def test_map_of_10000_items_by_default_chunks(pool: dista.Pool) -> None:
    assert pool.map(square, range(10_000)) == [x * x for x in range(10_000)]


def test_imap_in_order_and_unordered(pool: dista.Pool) -> None:
    assert list(pool.imap(square, range(20))) == [x * x for x in range(20)]
    assert list(pool.imap(square, range(20), chunksize=6)) == [x * x for x in range(20)]
    got = list(pool.imap_unordered(square, range(20), chunksize=3))
    assert sorted(got) == [x * x for x in range(20)]
    slow_first = list(pool.imap_unordered(pause, [1.0] + [0.0] * 4))
    assert slow_first[0] == 0.0 and sorted(slow_first) == [0.0] * 4 + [1.0]  # as they come


def test_imap_reads_an_endless_input_lazily(cluster: dista.Cluster) -> None:
    with dista.Pool() as p:
        values = p.imap(square, itertools.count(), chunksize=4)
        assert [next(values) for _ in range(10)] == [x * x for x in range(10)]
        assert values.next(timeout=10) == 100
        time.sleep(0.5)
        # the feeder keeps a bounded number of chunks ahead, not the endless input
        assert dista.stats().pending + dista.stats().running <= 64
    # the `with` terminated it: the feeder stopped too
    time.sleep(0.3)
    assert dista.stats().pending + dista.stats().running == 0


def test_imap_timeout_and_errors_at_their_place(pool: dista.Pool) -> None:
    values = pool.imap(pause, [1.0])
    with pytest.raises(multiprocessing.TimeoutError):
        values.next(timeout=0.1)
    results = pool.imap(fail_on, range(5))
    assert [next(results) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(KeyError):
        next(results)
    assert list(results) == [4]  # iterating on goes past it, as multiprocessing's

    def broken_input() -> object:
        yield 1
        raise OSError("the input broke")

    results = pool.imap(square, broken_input())  # type: ignore[arg-type]
    assert next(results) == 1
    with pytest.raises(OSError, match="the input broke"):
        next(results)
    assert list(results) == []


def test_apply_and_apply_async(pool: dista.Pool) -> None:
    assert pool.apply(divmod, (17, 5)) == (3, 2)
    assert pool.apply(sorted, ([3, 1, 2],), {"reverse": True}) == [3, 2, 1]
    result = pool.apply_async(pause, (0.5,))
    with pytest.raises(ValueError, match="not ready"):
        result.successful()
    assert not result.ready()
    with pytest.raises(multiprocessing.TimeoutError):
        result.get(timeout=0.05)
    result.wait(10)
    assert result.ready() and result.successful() and result.get() == 0.5


def test_callbacks_run_before_ready(pool: dista.Pool) -> None:
    seen: list[object] = []
    ready_when_called: list[bool] = []
    result = pool.apply_async(square, (9,), callback=seen.append)
    assert result.get(timeout=30) == 81 and seen == [81]
    failing = pool.apply_async(fail_on, (3,), error_callback=seen.append)
    with pytest.raises(KeyError):
        failing.get(timeout=30)
    assert not failing.successful() and isinstance(seen[-1], KeyError)

    def on_list(values: list[int]) -> None:
        ready_when_called.append(mapped.ready())
        seen.append(values)

    mapped = pool.map_async(square, range(6), callback=on_list)
    assert mapped.get(timeout=30) == [0, 1, 4, 9, 16, 25]
    assert seen[-1] == [0, 1, 4, 9, 16, 25] and ready_when_called == [False]
    errors: list[BaseException] = []
    bad = pool.starmap_async(fail_on, [(1,), (3,)], 1, error_callback=errors.append)
    with pytest.raises(KeyError):
        bad.get(timeout=30)
    assert len(errors) == 1 and isinstance(errors[0], dista.TaskError)


def test_map_raises_the_original_type(pool: dista.Pool) -> None:
    with pytest.raises(KeyError) as caught:
        pool.map(fail_on, range(10), chunksize=2)
    assert isinstance(caught.value, dista.TaskError)
    assert "raise KeyError(x)" in caught.value.remote_traceback


def test_initializer_runs_once_per_worker_before_its_tasks(
    cluster: dista.Cluster, tmp_path: Path
) -> None:
    with dista.Pool(initializer=init_worker, initargs=(str(tmp_path), "t1")) as p:
        seen = p.map(token_and_pid, range(60), chunksize=3)
        seen += [p.apply(token_and_pid, (0,)) for _ in range(6)]
        seen += list(p.imap_unordered(token_and_pid, range(10)))
    assert {token for token, _ in seen} == {"t1"}
    files = sorted(tmp_path.glob("init-*"))
    assert {int(f.name.split("-")[1]) for f in files} == {pid for _, pid in seen}
    assert all(f.read_text() == "x" for f in files)
    # another pool's initializer runs too, on the same workers
    with dista.Pool(initializer=init_worker, initargs=(str(tmp_path), "t2")) as p:
        assert {token for token, _ in p.map(token_and_pid, range(20), 1)} == {"t2"}


def test_close_then_join_waits_for_the_work(cluster: dista.Cluster) -> None:
    p = dista.Pool()
    results = [p.apply_async(pause, (0.3,)) for _ in range(4)]
    with pytest.raises(ValueError, match="still running"):
        p.join()
    p.close()
    with pytest.raises(ValueError, match="not running"):
        p.apply_async(square, (1,))
    with pytest.raises(ValueError, match="not running"):
        p.map(square, [1])
    p.join()
    assert all(r.ready() and r.get() == 0.3 for r in results)
    assert dista.stats().workers == 2  # a cluster it did not start keeps running


def test_terminate_stops_running_tasks(cluster: dista.Cluster, tmp_path: Path) -> None:
    paths = [tmp_path / "a", tmp_path / "b"]
    with dista.Pool() as p:
        results = [p.apply_async(tick, (str(path), 60.0)) for path in paths]
        queued = p.map_async(square, range(10), 1)
        wait_for_files(paths)
    # `with` terminated the pool: every unfinished result fails instead of hanging
    for r in results:
        with pytest.raises(dista.TaskCancelledError):
            r.get(timeout=5)
    assert queued.wait(5) is None and queued.ready()
    assert stopped_growing(paths)
    with pytest.raises(ValueError, match="not running"):
        p.apply(square, (1,))
    p.join()  # after terminate: returns


def test_terminate_from_another_thread_ends_a_blocked_map(cluster: dista.Cluster) -> None:
    p = dista.Pool()
    threading.Timer(0.3, p.terminate).start()
    start = time.monotonic()
    with pytest.raises(dista.TaskCancelledError):
        p.map(spin, [30.0, 30.0, 0.0], chunksize=1)
    assert time.monotonic() - start < 5
    p.join()
    deadline = time.monotonic() + 5
    while dista.stats().running:
        assert time.monotonic() < deadline, "the pool's tasks still run"
        time.sleep(0.05)


def test_arguments_checked_like_multiprocessing(cluster: dista.Cluster) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        dista.Pool(0)
    with pytest.raises(TypeError, match="initializer"):
        dista.Pool(initializer=5)  # type: ignore[arg-type]
    with pytest.warns(RuntimeWarning, match="maxtasksperchild"):
        dista.Pool(maxtasksperchild=10).terminate()
    with dista.Pool() as p:
        with pytest.raises(ValueError, match="Chunksize"):
            p.imap(square, [1], chunksize=0)
        with pytest.raises(ValueError, match="Chunksize"):
            p.map(square, [1], chunksize=0)


def test_callbacks_may_come_from_many_threads(pool: dista.Pool) -> None:
    done = threading.Event()
    results: list[int] = []
    lock = threading.Lock()

    def add(value: int) -> None:
        with lock:
            results.append(value)
            if len(results) == 50:
                done.set()

    for x in range(50):
        pool.apply_async(square, (x,), callback=add)
    assert done.wait(30) and sorted(results) == sorted(x * x for x in range(50))


SCRIPT = textwrap.dedent(
    """
    import os

    from dista_runtime import Pool  # was: from multiprocessing import Pool
    import dista_runtime as dista
    from dista_runtime._session import context
    from tests.support.cluster import assert_gone


    def f(x):
        return x * x


    def where(_):
        return os.getpid()


    if __name__ == "__main__":
        with Pool(processes=2) as pool:
            pids = dista.local_pids()
            assert len(pids) == 2, pids
            print(pool.map(f, range(10)))
            print(sorted(set(pool.map(where, range(40), 1))) == sorted(pids))
            it = pool.imap(f, range(5))
            print(next(it), list(it))
            res = pool.apply_async(os.getpid, ())
            print(res.get(timeout=60) in pids)
            print(pool.map(lambda x: -x, range(3)))
        assert context.current() is None, "the pool's cluster is still joined"
        assert_gone(pids)
        print("gone")
    """
)


@pytest.mark.timeout(120)
def test_a_multiprocessing_script_moved_by_its_import(tmp_path: Path) -> None:
    done = run_script(tmp_path, SCRIPT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        "[0, 1, 4, 9, 16, 25, 36, 49, 64, 81]",
        "True",
        "0 [1, 4, 9, 16]",
        "True",
        "[0, -1, -2]",
        "gone",
    ], done.stdout + done.stderr
