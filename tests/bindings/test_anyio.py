"""dista_anyio: Dista on anyio, under its asyncio backend and under trio.

Drivers join with ``async with dista_anyio.connect(...)`` on the test's own loop (every
such test runs once per backend, as anyio's own tests do); heads and workers are real
``dista`` processes started with ``--loop trio``; local clusters are ``dista.init(loop=)``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

anyio = pytest.importorskip("anyio")
pytest.importorskip("dista_anyio")  # anyio with sniffio

import dista_anyio

import dista_runtime as dista
from tests.bindings.support import anyio_tasks as atasks
from tests.bindings.support import tasks as btasks
from tests.support import tasks
from tests.support.cluster import (
    assert_gone,
    child_env,
    cli,
    head_process,
    stop_process,
    task_modules,
)

pytestmark = pytest.mark.timeout(120)


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


#: anyio's backends; trio's tests are skipped where trio is not installed.
BACKENDS = [
    "asyncio",
    pytest.param("trio", marks=pytest.mark.skipif(not _has("trio"), reason="needs trio")),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@contextlib.contextmanager
def cluster_on(loop: str, workers: int, *head_args: str) -> Iterator[str]:
    """A ``dista head`` and ``workers`` workers, all started with ``--loop LOOP``; the
    head's address. The workers import every task module this process has."""
    with head_process("--loop", loop, *head_args, env=child_env()) as address:
        modules = ",".join(task_modules())
        started = [
            subprocess.Popen(
                cli("worker", "--head", address, "--loop", loop, "--import", modules),
                env=child_env(),
            )
            for _ in range(workers)
        ]
        try:
            anyio.run(_until_workers, address, workers)
            yield address
        finally:
            for process in started:
                stop_process(process)


async def _until_workers(address: str, n: int) -> None:
    async with dista_anyio.connect(address):
        with anyio.fail_after(30):
            while (await dista.stats_async()).workers < n:
                await anyio.sleep(0.05)


@pytest.fixture(scope="module")
def trio_head() -> Iterator[str]:
    """A head and two workers on trio, shared by the module's driver tests."""
    pytest.importorskip("trio")
    with cluster_on("trio", 2) as address:
        yield address


async def _until_exists(path: str, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while not os.path.exists(path):
            await anyio.sleep(0.02)


# -- a driver on the program's own loop ----------------------------------------------------


def test_await_ref_under_trio(trio_head: str) -> None:
    trio = pytest.importorskip("trio")

    async def main() -> list[int]:
        before = {t.name for t in threading.enumerate()}
        async with dista_anyio.connect(trio_head) as cluster:
            assert isinstance(cluster, dista.Cluster)
            one = await tasks.add.remote(1, 2)
            out: list[int] = []

            async def add(i: int) -> None:
                out.append(await tasks.add.remote(i, one))

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(add, i)
            assert {t.name for t in threading.enumerate()} <= before  # no I/O thread
            assert (await dista.stats_async()).workers == 2
        return [one, *sorted(out)]

    assert trio.run(main) == [3, *(i + 3 for i in range(20))]


def test_await_ref_on_either_backend(trio_head: str, backend: str) -> None:
    async def main() -> tuple[int, list[int], int]:
        async with dista_anyio.connect(trio_head):
            refs = [tasks.add.remote(i, 1) for i in range(50)]
            values = [await ref for ref in refs]
            q, r = tasks.divmod_task.remote(tasks.add.remote(10, 7), 5)
            return await tasks.total.remote(refs), values, await q * 10 + await r

    total, values, qr = anyio.run(main, backend=backend)
    assert values == list(range(1, 51)) and total == sum(values) and qr == 32


def test_connect_inside_a_plain_asyncio_program(trio_head: str) -> None:
    """Under ``asyncio.run`` (not ``anyio.run``): a value read from a worker's object server
    (a connection dialed from a read on the head's link) and an async task's result."""
    import asyncio

    async def main() -> tuple[int, Any]:
        async with dista_anyio.connect(trio_head):
            data = await btasks.blob.remote(8)
            return len(data), await atasks.where_async.remote()

    assert asyncio.run(main()) == (8 << 20, ("trio", "MainThread"))


def test_errors_in_the_body_and_a_bad_address_are_raised_as_they_are(
    trio_head: str, backend: str
) -> None:
    async def body_fails(address: str) -> None:
        async with dista_anyio.connect(address):
            raise KeyError("mine")

    async def nobody_there() -> None:
        async with dista_anyio.connect("127.0.0.1:1", timeout=5):
            pass

    with pytest.raises(KeyError, match="mine"):  # not in an exception group
        anyio.run(body_fails, trio_head, backend=backend)
    with pytest.raises(ConnectionError, match=r"cannot reach a Dista head at 127\.0\.0\.1:1\b"):
        anyio.run(nobody_there, backend=backend)


def test_a_cancelled_wait_cancels_only_the_wait(
    trio_head: str, backend: str, tmp_path: Path
) -> None:
    start, end = str(tmp_path / "start"), str(tmp_path / "end")

    async def main() -> tuple[int, int, int]:
        async with dista_anyio.connect(trio_head):
            slow = btasks.mark_then_sleep.remote(1.0, 7, start, end)
            await _until_exists(start)
            with anyio.move_on_after(0.2) as scope:  # a cancelled scope
                await slow
            assert scope.cancelled_caught
            async with anyio.create_task_group() as group:  # a cancelled task group
                group.start_soon(partial(_await, slow))
                group.start_soon(partial(_await, tasks.sleep_then.remote(5, 1)))
                await anyio.sleep(0.2)
                group.cancel_scope.cancel()
            other = await tasks.add.remote(1, 2)  # the connection is sound
            assert not os.path.exists(end)
            return other, await slow, await tasks.add.remote(2, 2)

    assert anyio.run(main, backend=backend) == (3, 7, 4)
    assert Path(end).read_text() == "ran to the end"  # the task itself was left alone


async def _await(ref: Any) -> None:
    await ref


def test_cancel_remote_cancels_the_task_too(trio_head: str, backend: str, tmp_path: Path) -> None:
    async def main() -> int:
        async with dista_anyio.connect(trio_head, cancel_remote=True):
            for case in ("scope", "group"):
                start, end = str(tmp_path / f"{case}-start"), str(tmp_path / f"{case}-end")
                ref = btasks.mark_then_sleep.remote(1.0, 7, start, end)
                await _until_exists(start)
                started = time.monotonic()
                if case == "scope":
                    with anyio.move_on_after(0.1):
                        await ref
                else:
                    async with anyio.create_task_group() as group:
                        group.start_soon(partial(_await, ref))
                        await anyio.sleep(0.1)
                        group.cancel_scope.cancel()
                with anyio.fail_after(20), pytest.raises(dista.TaskCancelledError):
                    await ref
                # Past the end it would have reached: it never got there.
                await anyio.sleep(max(0.0, 1.5 - (time.monotonic() - started)))
                assert not os.path.exists(end), case
            return await tasks.add.remote(1, 2)  # the connection and the workers serve on

    assert anyio.run(main, backend=backend) == 3


# -- workers on trio -----------------------------------------------------------------------


def test_async_tasks_run_on_the_workers_loop_and_plain_ones_in_threads(trio_head: str) -> None:
    async def main() -> tuple[Any, str, int]:
        async with dista_anyio.connect(trio_head):
            return (
                await atasks.where_async.remote(0.01),
                await atasks.where_plain.remote(),
                await atasks.awaits_children.remote(5),
            )

    (library, loop_thread), plain_thread, total = anyio.run(main)
    assert (library, loop_thread) == ("trio", "MainThread")
    assert plain_thread != "MainThread"
    assert total == sum(range(1, 6))


def test_cancelling_an_async_task_on_a_trio_worker(trio_head: str, tmp_path: Path) -> None:
    async def main() -> int:
        async with dista_anyio.connect(trio_head, cancel_remote=True):
            for case in ("ref.cancel", "cancel_remote"):
                start, end = str(tmp_path / f"{case}-start"), str(tmp_path / f"{case}-end")
                ref = atasks.mark_then_sleep_async.remote(1.0, start, end)
                await _until_exists(start)
                if case == "ref.cancel":
                    ref.cancel()
                else:
                    with anyio.move_on_after(0.05):
                        await ref
                with anyio.fail_after(20), pytest.raises(dista.TaskCancelledError):
                    await ref
                await anyio.sleep(1.5)
                assert not os.path.exists(end), case  # cancelled on the worker's loop
            return await atasks.awaits_children.remote(3)  # the worker's loop serves on

    assert anyio.run(main, backend="trio") == 6


def test_an_async_task_lends_its_slot_while_it_awaits() -> None:
    """One worker with one slot: the task's children could never run if the awaiting task
    kept its slot (the worker finds it by `current_task`)."""
    pytest.importorskip("trio")

    async def main() -> int:
        async with dista_anyio.connect(address):
            with anyio.fail_after(30):
                return await atasks.awaits_children.remote(4)

    with cluster_on("trio", 1, "--worker-slots", "1", "--prefetch", "0") as address:
        assert anyio.run(main) == sum(range(1, 5))


# -- local clusters: dista.init(loop=...) ---------------------------------------------------


@pytest.mark.parametrize(
    ("loop", "library"),
    [
        ("anyio", "asyncio"),
        pytest.param("trio", "trio", marks=pytest.mark.skipif(not _has("trio"), reason="trio")),
    ],
)
def test_a_local_cluster(loop: str, library: str) -> None:
    np = pytest.importorskip("numpy")
    with dista.init(workers=2, loop=loop) as cluster:
        assert tasks.add.remote(1, 2).get(timeout=30) == 3
        assert dista.get([tasks.add.remote(i, 1) for i in range(200)]) == list(range(1, 201))
        assert atasks.where_async.remote().get(timeout=30) == (library, "MainThread")
        array = np.arange(200 << 20, dtype=np.uint8)  # 200 MiB there and back
        ref = dista.put(array)
        assert tasks.checksum.remote(ref).get(timeout=60) == int(array.sum(dtype=np.int64))
        back = ref.get(timeout=60)
        assert back.nbytes == 200 << 20 and np.array_equal(back, array)
        blob = btasks.blob.remote(200)
        assert btasks.length_and_sum.remote(blob).get(timeout=60)[0] == 200 << 20
        assert len(blob.get(timeout=60)) == 200 << 20
        if _has("trio"):  # refs of this driver, awaited on another loop (trio's)
            import trio

            async def awaited() -> int:
                return await tasks.add.remote(2, 3)

            assert trio.run(awaited) == 5
        del ref, back, blob, array
        gc.collect()
        deadline = time.monotonic() + 10
        while (stats := dista.stats()).objects or stats.held_bytes:
            assert time.monotonic() < deadline, stats
            time.sleep(0.05)
        assert (stats.pending, stats.running, stats.workers) == (0, 0, 2)
        pids = cluster.pids()
    assert_gone(pids)


# -- the CLI roles on trio -----------------------------------------------------------------


def test_cli_head_worker_status_and_stop_on_trio() -> None:
    pytest.importorskip("trio")
    env = child_env()
    head = subprocess.Popen(
        cli("head", "--port", "0", "--loop", "trio"), stderr=subprocess.PIPE, text=True, env=env
    )
    processes = [head]
    try:
        assert head.stderr is not None
        line = head.stderr.readline()
        assert " head INFO dista head listening on " in line, line
        address = line.rsplit(" ", 1)[1].strip()
        worker = cli("worker", "--head", address, "--loop", "trio")
        processes += [subprocess.Popen(worker, env=env) for _ in range(2)]

        def status() -> str:
            done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
                cli("status", "--head", address, "--loop", "trio"),
                capture_output=True,
                text=True,
                timeout=30,
                env=env,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        deadline = time.monotonic() + 30
        while "workers: 2" not in (shown := status()):
            assert time.monotonic() < deadline, shown
            time.sleep(0.1)
        # Ctrl-C: a worker (a role run without `stop`) ends with KeyboardInterrupt (130).
        processes[2].send_signal(signal.SIGINT)
        assert processes[2].wait(20) == 130
        stopped = subprocess.run(  # noqa: PLW1510
            cli("stop", "--head", address, "--loop", "trio"),
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        assert stopped.returncode == 0, stopped.stderr
        assert head.wait(20) == 0 and processes[1].wait(20) == 0
        assert "dista head: " in head.stderr.read()
    finally:
        for process in processes:
            stop_process(process)


def test_a_signal_stops_a_trio_head() -> None:
    pytest.importorskip("trio")
    head = subprocess.Popen(
        cli("head", "--port", "0", "--loop", "trio"),
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert head.stderr is not None
        assert "listening on" in head.stderr.readline()
        head.send_signal(signal.SIGTERM)
        assert head.wait(20) == 0
        assert "stopped by a signal" in head.stderr.read()
    finally:
        stop_process(head)
