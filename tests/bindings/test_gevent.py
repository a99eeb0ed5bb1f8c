"""dista_gevent on real processes: drivers patched and not, every CLI role on gevent, the
worker's runners (threads, or greenlets with ``--greenlets``), and the greenlets of the
loop's connections (the contract every binding keeps: `test_loop_contract`).

A monkey-patched driver must be a process of its own (pytest's is not patched): those run
as scripts in a subprocess and print what they saw as JSON.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("gevent")

import dista_gevent
import gevent

import dista_runtime as dista
from dista_runtime._session import context as _context
from tests.bindings.support import gevent_tasks as gt
from tests.bindings.support import tasks as bt
from tests.bindings.support.contract import Binding, Rig, until
from tests.support import fault_tasks as ft
from tests.support import tasks
from tests.support.cluster import (
    assert_gone,
    child_env,
    cli,
    settle_to_zero,
    stop_process,
    task_modules,
    wait_for_workers,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


class GeventCluster:
    """`dista head --loop gevent` and one `dista worker --loop gevent WORKER_ARGS` process,
    importing every task module this process has (so that it serves this driver)."""

    def __init__(self, *worker_args: str) -> None:
        self.head = subprocess.Popen(
            cli("head", "--port", "0", "--loop", "gevent"),
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.worker: subprocess.Popen[str] | None = None
        assert self.head.stderr is not None
        line = self.head.stderr.readline()
        assert "listening on" in line, line
        self.address = line.rsplit(" ", 1)[1].strip()
        imports = ",".join(task_modules())
        args = ["--head", self.address, "--loop", "gevent", *worker_args, "--import", imports]
        self.worker = subprocess.Popen(cli("worker", *args), env=child_env())

    def ask(self, command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: PLW1510  (the callers assert on returncode)
            cli(command, "--head", self.address, "--loop", "gevent"),
            capture_output=True,
            text=True,
            timeout=30,
            env=child_env(),
        )

    def close(self) -> None:
        for process in (self.worker, self.head):
            if process is not None:
                stop_process(process)


@pytest.fixture
def clusters() -> Iterator[list[GeventCluster]]:
    """Every `GeventCluster` a test starts (appended here) is stopped at its end."""
    started: list[GeventCluster] = []
    try:
        yield started
    finally:
        for cluster in started:
            cluster.close()


def _script(body: str, *args: str, timeout: float = 90) -> Any:
    """Run ``body`` in a fresh, monkey-patched Python process; the JSON it printed last."""
    code = "from gevent import monkey; monkey.patch_all()\n" + textwrap.dedent(body)
    done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- unpatched drivers ---------------------------------------------------------------------


def test_an_unpatched_local_cluster_on_gevent() -> None:
    with dista.init(workers=2, loop="gevent") as cluster:
        wait_for_workers(2)
        assert tasks.add.remote(1, 2).get(timeout=30) == 3
        refs = [tasks.add.remote(i, i) for i in range(200)]
        assert dista.get(refs, timeout=30) == [2 * i for i in range(200)]
        nested = tasks.total.remote([tasks.add.remote(1, 1), 3], {"x": tasks.add.remote(2, 2)})
        assert nested.get(timeout=30) == 9  # refs at any depth arrive as their values
        q, r = tasks.divmod_task.remote(tasks.add.remote(10, 7), 5)
        assert (q.get(timeout=30), r.get(timeout=30)) == (3, 2)
        assert tasks.nested_sum.remote(10).get(timeout=30) == 55
        assert tasks.async_add.remote(2, 3).get(timeout=30) == 5
        blob = bt.blob.remote(200)  # 200 MiB: worker to worker, then to this driver
        size, checksum = bt.length_and_sum.remote(blob).get(timeout=60)
        data = blob.get(timeout=60)
        assert size == len(data) == 200 << 20
        assert checksum == sum(data[:: 1 << 16])
        del refs, nested, q, r, blob, data
        assert settle_to_zero().workers == 2
        pids = cluster.pids()
    assert_gone(pids)


def test_cli_head_and_worker_on_gevent_an_unpatched_connect_status_and_stop(
    clusters: list[GeventCluster],
) -> None:
    cluster = GeventCluster("--threads", "2")
    clusters.append(cluster)
    with dista_gevent.connect(cluster.address, timeout=20) as joined:
        assert joined.address == cluster.address
        wait_for_workers(1)
        assert tasks.add.remote(2, 3).get(timeout=30) == 5
        assert sum(dista.get([tasks.add.remote(i, 1) for i in range(500)], timeout=30)) == 125250
        assert gt.runs_in.remote().get(timeout=30) == "thread"
        _, main = gt.async_runs_in.remote().get(timeout=30)
        assert not main  # async def tasks: an asyncio loop in a thread, not the hub's
        assert tasks.nested_sum.remote(5).get(timeout=30) == 15
    assert _context.current() is None  # left: connect() can run again
    with dista.init(cluster.address, loop="gevent"):  # dista.init's way to the same head
        assert tasks.add.remote(1, 1).get(timeout=30) == 2
        status = cluster.ask("status")
        assert status.returncode == 0, status.stderr
        assert "workers: 1" in status.stdout and "drivers: 1" in status.stdout
    stopped = cluster.ask("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert cluster.head.wait(20) == 0
    assert cluster.worker is not None and cluster.worker.wait(20) == 0


def test_connect_to_nowhere_fails_and_leaves_no_thread_behind(tmp_path: Path) -> None:
    before = threading.active_count()
    with (
        pytest.raises(ConnectionError, match="cannot reach"),
        dista_gevent.connect(f"unix:{tmp_path}/nobody", timeout=5),
    ):
        pass
    with pytest.raises(dista.DistaError, match="HOST:PORT"), dista_gevent.connect("nowhere"):
        pass
    assert threading.active_count() == before


# -- monkey-patched drivers ------------------------------------------------------------------

WAITS = """
    import importlib, json, sys, time, gevent, dista_gevent
    import dista_runtime as dista
    from tests.support import fault_tasks as ft, tasks
    from tests.bindings.support import tasks as bt

    ticks = [0]

    def tick():
        while True:
            gevent.sleep(0.05)
            ticks[0] += 1

    def ticked(wait):
        '''How many 50 ms ticks the ticker made while this greenlet waited ~1 s.'''
        before = ticks[0]
        wait()
        return ticks[0] - before

    how, address = sys.argv[1], sys.argv[2]
    for module in sys.argv[3:]:  # the CLI worker's: it serves drivers of exactly its modules
        importlib.import_module(module)
    if how == "connect":
        joined = dista_gevent.connect(address)
    elif how == "init-address":
        joined = dista.init(address, loop="gevent")
    else:
        joined = dista.init(workers=1, loop="gevent")  # a local cluster: its head on our hub
    with joined as cluster:
        out = {"pids": cluster.pids()}
        assert tasks.add.remote(1, 2).get(timeout=30) == 3
        ticker = gevent.spawn(tick)
        out["ref.get"] = ticked(lambda: ft.nap.remote(1.0).get(timeout=30))
        out["dista.get"] = ticked(lambda: dista.get([ft.nap.remote(1.0)], timeout=30))
        out["dista.wait"] = ticked(lambda: dista.wait([ft.nap.remote(1.0)], timeout=30))
        out["as_completed"] = ticked(lambda: list(dista.as_completed([ft.nap.remote(1.0)], 30)))
        ticker.kill()
        jobs = [gevent.spawn(lambda i=i: tasks.add.remote(i, 1).get(timeout=30)) for i in range(50)]
        gevent.joinall(jobs, raise_error=True)
        out["greenlets"] = sum(job.value for job in jobs)
        nested = tasks.total.remote([tasks.add.remote(1, 1), 3], {"x": tasks.add.remote(2, 2)})
        out["nested"] = nested.get(timeout=30)
        blob = bt.blob.remote(200)
        out["size"] = bt.length_and_sum.remote(blob).get(timeout=60)[0]
        out["read"] = len(blob.get(timeout=60))
        del nested, blob
        out["stats"] = list(dista.stats())
        deadline = time.monotonic() + 10
        while tuple(out["stats"][:4]) != (0, 0, 0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
            out["stats"] = list(dista.stats())
    print(json.dumps(out))
"""


@pytest.mark.parametrize("how", ["init-local", "init-address", "connect"])
def test_a_patched_driver_waits_without_stopping_its_other_greenlets(
    how: str, clusters: list[GeventCluster]
) -> None:
    args = [how, ""]
    if how != "init-local":
        cluster = GeventCluster("--threads", "2")
        clusters.append(cluster)
        args = [how, cluster.address, *task_modules()]
    out = _script(WAITS, *args)
    for wait in ("ref.get", "dista.get", "dista.wait", "as_completed"):
        assert out[wait] >= 12, out  # about 20 in the second the task sleeps
    assert out["greenlets"] == sum(range(1, 51))
    assert out["nested"] == 9
    assert out["size"] == out["read"] == 200 << 20
    assert out["stats"][:4] == [0, 0, 0, 0], out
    assert len(out["pids"]) == (1 if how == "init-local" else 0)
    assert_gone(out["pids"])  # a local cluster's workers end with it


# -- a gevent worker's runners ----------------------------------------------------------------


@pytest.mark.parametrize("runners", ["threads", "greenlets"])
def test_a_gevent_worker_cancels_nests_and_survives_its_tasks(
    runners: str, clusters: list[GeventCluster], tmp_path: Path
) -> None:
    flags = ["--threads", "2", *(["--greenlets"] if runners == "greenlets" else [])]
    cluster = GeventCluster(*flags)
    clusters.append(cluster)
    with dista_gevent.connect(cluster.address, timeout=20):
        wait_for_workers(1)
        assert gt.runs_in.remote().get(timeout=30) == runners[:-1]
        # Cooperative code cooperates in greenlets: four 0.5 s naps at once.
        took = gt.cooperative_naps.remote(4, 0.5).get(timeout=30)
        assert took < 1.5 if runners == "greenlets" else took >= 2
        # A running task is interrupted by its cancel, and the worker serves on.
        start, end = str(tmp_path / "start"), str(tmp_path / "end")
        ref = bt.mark_then_sleep.remote(30, 1, start, end)
        deadline = time.monotonic() + 20
        while not os.path.exists(start):
            assert time.monotonic() < deadline, "the task never started"
            time.sleep(0.02)
        began = time.monotonic()
        ref.cancel()
        with pytest.raises(dista.TaskCancelledError):
            ref.get(timeout=10)
        assert time.monotonic() - began < 5
        time.sleep(0.3)
        assert not os.path.exists(end)
        if runners == "threads":  # Python code that never waits: only a thread is interrupted
            spinning = ft.spin.remote(30, str(tmp_path / "spin"))
            while not (tmp_path / "spin").exists():
                time.sleep(0.02)
            spinning.cancel()
            with pytest.raises(dista.TaskCancelledError):
                spinning.get(timeout=10)
            del spinning
        # Nested gets lend their slot: every call of fib a task, two slots.
        assert ft.fib.remote(8).get(timeout=60) == 21
        assert ft.afib.remote(6).get(timeout=60) == 8
        # sys.exit and KeyboardInterrupt fail only their task.
        for ref, what in [
            (ft.exits.remote(2), "sys.exit(2)"),
            (ft.interrupts_itself.remote(), "KeyboardInterrupt"),
        ]:
            with pytest.raises(dista.TaskError, match=re.escape(what)):
                ref.get(timeout=30)
        assert tasks.add.remote(2, 2).get(timeout=30) == 4
        assert cluster.worker is not None and cluster.worker.poll() is None
        del ref
        assert settle_to_zero().workers == 1


def test_signals_stop_a_gevent_head_and_interrupt_a_gevent_worker(
    clusters: list[GeventCluster],
) -> None:
    cluster = GeventCluster()
    clusters.append(cluster)
    with dista_gevent.connect(cluster.address, timeout=20):
        wait_for_workers(1)
    assert cluster.worker is not None
    cluster.worker.send_signal(signal.SIGINT)  # no stop given: Ctrl-C is KeyboardInterrupt
    assert cluster.worker.wait(20) == 130
    cluster.head.send_signal(signal.SIGINT)  # the head's stop: it says so, and exits 0
    assert cluster.head.wait(20) == 0
    assert cluster.head.stderr is not None
    assert "stopped by a signal" in cluster.head.stderr.read()


# -- the loop itself (its contract: tests/bindings/test_loop_contract.py) ---------------------


def _connection_greenlets(hub: Any) -> list[gevent.Greenlet]:
    """The readers and writers of the connections on ``hub``."""
    from dista_gevent._loop import _Pump

    return [
        g
        for g in gc.get_objects()
        if isinstance(g, gevent.Greenlet)
        and g.parent is hub
        and getattr(g._run, "__func__", None) is _Pump._run
        and getattr(g.args[0], "__name__", "") in ("reading", "writing")
    ]


def test_closing_under_waiting_greenlets_ends_every_connection_greenlet(tmp_path: Path) -> None:
    rig = Rig(Binding("gevent"))  # unpatched: a hub on its own thread
    try:
        rig.dial(100, rig.listen(f"unix:{tmp_path}/sock"))
        assert rig.dialed(100) == ""
        rig.until_links([1, 100])
        # 32 MiB one way: over the high-water mark, so the writer greenlet waits for room.
        rig.write(100, bytes(32 << 20))
        until(lambda: rig.received(1).count == 32 << 20, 30)
        # Both readers now wait on their sockets; closing one end ends both, and every
        # connection greenlet returns (none is left waiting on a closed descriptor).
        greenlets = rig.call(_connection_greenlets, rig.loop.hub)
        assert len(greenlets) == 4 and not any(g.dead for g in greenlets)
        rig.close(1)
        until(lambda: sorted(rig.lost()) == [1, 100])
        until(lambda: all(g.dead for g in greenlets))
    finally:
        rig.stop()


# -- the example -------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_the_gevent_wsgi_example_answers_concurrent_requests() -> None:
    service = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "gevent_wsgi.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )
    try:
        assert service.stdout is not None
        line = service.stdout.readline()
        assert "serving on" in line, line
        url = line.rsplit(" ", 1)[1].strip()

        def fetch(path: str) -> Any:
            with urllib.request.urlopen(url + path, timeout=60) as answer:
                return json.loads(answer.read())

        with ThreadPoolExecutor(12) as pool:
            squares = [pool.submit(fetch, f"/square?n={n}&sleep=1") for n in range(10)]
            time.sleep(0.3)  # the squares are in flight: the service answers meanwhile
            began = time.monotonic()
            assert fetch("/ping") == {"ok": True}
            assert time.monotonic() - began < 0.9
            assert [f.result() for f in squares] == [{"n": n, "square": n * n} for n in range(10)]
        workers = [p.pid for p in psutil.Process(service.pid).children(recursive=True)]
        assert len(workers) == 2  # its local cluster's
        with ThreadPoolExecutor(1) as pool:  # a request in flight when SIGTERM comes
            late = pool.submit(fetch, "/square?n=5&sleep=1.5")
            time.sleep(0.5)
            service.send_signal(signal.SIGTERM)
            assert late.result() == {"n": 5, "square": 25}  # it finished first
        assert service.wait(30) == 0
    finally:
        stop_process(service)
    assert_gone([service.pid, *workers])
