"""The same behaviour on every binding: one suite, run once per loop.

Each loop gets a local cluster (`dista.init(loop=...)`: its head and this driver on that
binding, its worker processes started with ``--loop`` too) for the task tests, and a CLI
head and worker on that loop for status, stop and a driver on the binding's own loop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dista_runtime as dista
from tests.bindings.support import tasks as btasks
from tests.bindings.support.loops import Cluster, loop_params
from tests.support import tasks
from tests.support.cluster import assert_gone, child_env, cli, settle_to_zero, wait_for_workers

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module", params=loop_params())
def loop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A local cluster of two workers on the loop, for the module's tests of that loop;
    its workers checkpoint actors to a directory of their own."""
    name: str = request.param
    store = tmp_path_factory.mktemp("checkpoints")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISTA_CHECKPOINT_URI", store.as_uri())
        with dista.init(workers=2, loop=name) as cluster:
            wait_for_workers(2)
            yield name
    assert_gone(cluster.pids() or [])


def test_tasks_and_refs_in_arguments(loop: str) -> None:
    assert tasks.add.remote(1, 2).get() == 3
    refs = [tasks.add.remote(i, i) for i in range(200)]
    assert dista.get(refs) == [2 * i for i in range(200)]
    # Refs at any depth of the arguments arrive as their values.
    nested = tasks.total.remote([tasks.add.remote(1, 1), 3], {"x": tasks.add.remote(2, 2)})
    assert nested.get() == 2 + 3 + 4


def test_task_after_gather_with_value_and_many(loop: str) -> None:
    first = tasks.add.remote(1, 2)
    assert tasks.add.remote(first, 10).get() == 13  # after one input, with a value
    gathered = tasks.total.remote([tasks.add.remote(i, 0) for i in range(50)])
    assert gathered.get() == sum(range(50))  # after many inputs
    q, r = tasks.divmod_task.remote(tasks.add.remote(10, 7), 5)  # after, many results
    assert (q.get(), r.get()) == (3, 2)


def test_a_200_mib_object_in_parts(loop: str) -> None:
    ref = btasks.blob.remote(200)
    size, checksum = btasks.length_and_sum.remote(ref).get()  # worker to worker
    data = ref.get()  # worker to driver
    assert size == len(data) == 200 << 20
    assert checksum == sum(data[:: 1 << 16])
    del data


def test_a_task_that_submits_tasks_and_async_tasks(loop: str) -> None:
    assert tasks.nested_sum.remote(10).get() == sum(range(1, 11))
    assert btasks.async_add_nested.remote(2, 3).get() == 5


def test_cancel_stops_a_running_task(loop: str, tmp_path: Path) -> None:
    start, end = str(tmp_path / "start"), str(tmp_path / "end")
    ref = btasks.mark_then_sleep.remote(30, 1, start, end)
    deadline = time.monotonic() + 20
    while not os.path.exists(start):
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.02)
    ref.cancel()
    with pytest.raises(dista.TaskCancelledError):
        ref.get(timeout=10)
    time.sleep(0.3)
    assert not os.path.exists(end)
    assert tasks.add.remote(1, 1).get(timeout=10) == 2  # the worker serves on


def test_release_brings_the_head_back_to_zero(loop: str) -> None:
    refs = [tasks.add.remote(i, 1) for i in range(100)]
    dista.get(refs)
    big = btasks.blob.remote(8)
    big.get()
    del refs, big
    stats = settle_to_zero()
    assert stats.workers == 2


def test_timeline_records_the_tasks(loop: str) -> None:
    dista.get([tasks.add.remote(i, 1) for i in range(5)])
    records = dista.timeline()
    assert len(records) >= 5
    assert all(r.ended >= r.started for r in records)


def test_a_lost_workers_task_is_retried(loop: str, tmp_path: Path) -> None:
    start = str(tmp_path / "start")
    ref = btasks.mark_then_sleep.remote(2, 7, start)
    deadline = time.monotonic() + 20
    while not os.path.exists(start) or not Path(start).read_text():
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.02)
    os.kill(int(Path(start).read_text()), signal.SIGKILL)
    assert ref.get(timeout=60) == 7  # run again on the other worker (or the replacement)
    wait_for_workers(2, timeout=30)  # the local cluster replaced the lost worker


def test_an_actor_runs_in_order_and_survives_its_worker(loop: str) -> None:
    tally = btasks.Tally.remote()  # checkpoint_every=5
    refs = [tally.add.remote(1) if i % 3 else tally.add_later.remote(1) for i in range(60)]
    assert dista.get(refs, timeout=60) == list(range(1, 61))
    assert btasks.tally_through.remote(tally, 10).get(timeout=30) == 70
    os.kill(tally.pid.remote().get(timeout=30), signal.SIGKILL)
    more = [tally.add.remote(1) for _ in range(20)]
    assert dista.get(more, timeout=60) == list(range(71, 91))  # each call once, in order
    tally.checkpoint(timeout=30)
    tally.kill()
    with pytest.raises(dista.TaskError, match="killed"):
        tally.add.remote(1).get(timeout=30)
    wait_for_workers(2, timeout=30)  # the lost worker was replaced
    del refs, more
    settle_to_zero()


# -- a CLI head and worker on the loop; a driver on the binding's own loop ---------------------

DRIVERS = {
    "asyncio": """
        import asyncio, dista_asyncio
        async def main():
            async with dista_asyncio.connect(ADDRESS):
                print(await add.remote(1, 2), sum(await asyncio.gather(*(add.remote(i, 1) for i in range(20)))))
                acc = Acc.remote()
                print((await asyncio.gather(*(acc.add.remote(i) for i in range(1, 6))))[-1])
                acc.kill()
        asyncio.run(main())
    """,
    "anyio": """
        import anyio, dista_anyio
        async def main():
            async with dista_anyio.connect(ADDRESS):
                out = []
                async with anyio.create_task_group() as tg:
                    async def one(i):
                        out.append(await add.remote(i, 1))
                    for i in range(20):
                        tg.start_soon(one, i)
                print(await add.remote(1, 2), sum(out))
                acc = Acc.remote()
                refs = [acc.add.remote(i) for i in range(1, 6)]
                print([await ref for ref in refs][-1])
                acc.kill()
        anyio.run(main, backend="asyncio")
    """,
    "trio": """
        import trio, dista_anyio
        async def main():
            async with dista_anyio.connect(ADDRESS):
                out = []
                async with trio.open_nursery() as nursery:
                    async def one(i):
                        out.append(await add.remote(i, 1))
                    for i in range(20):
                        nursery.start_soon(one, i)
                print(await add.remote(1, 2), sum(out))
                acc = Acc.remote()
                refs = [acc.add.remote(i) for i in range(1, 6)]
                print([await ref for ref in refs][-1])
                acc.kill()
        trio.run(main)
    """,
    "gevent": """
        from gevent import monkey; monkey.patch_all()
        import gevent, dista_gevent
        with dista_gevent.connect(ADDRESS):
            jobs = [gevent.spawn(lambda i=i: add.remote(i, 1).get()) for i in range(20)]
            gevent.joinall(jobs)
            print(add.remote(1, 2).get(), sum(j.value for j in jobs))
            acc = Acc.remote()
            refs = [acc.add.remote(i) for i in range(1, 6)]
            print(dista.get(refs)[-1])
            acc.kill()
    """,
}


#: An actor the driver scripts define (in ``__main__``: its class travels by value).
ACTOR = """
import dista_runtime as dista
from tests.support.tasks import add

@dista.actor
class Acc:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n
"""


def run_driver(loop: str, address: str) -> str:
    """A driver process on ``loop``'s own event loop; what it printed."""
    script = ACTOR + textwrap.dedent(DRIVERS[loop])
    # monkey.patch_all() must come first in a gevent program: the imports follow it.
    if loop == "gevent":
        head, rest = textwrap.dedent(DRIVERS[loop]).split("\n", 2)[1:]
        script = f"{head}\n{ACTOR}\n{rest}"
    done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
        [*cli()[:1], "-c", script.replace("ADDRESS", repr(address))],
        capture_output=True,
        text=True,
        timeout=90,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("name", loop_params())
def test_cli_roles_status_stop_and_a_driver_on_its_own_loop(
    name: str, cli_cluster: list[Cluster]
) -> None:
    cluster = Cluster(name, name, "tests.support.tasks")
    cli_cluster.append(cluster)
    cluster.wait_for_workers(name, 1)
    assert run_driver(name, cluster.address).split() == ["3", str(sum(range(1, 21))), "15"]
    assert "workers: 1" in cluster.status(name)
    stopped = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
        cli("stop", "--head", cluster.address, "--loop", name),
        capture_output=True,
        text=True,
        timeout=30,
        env=child_env(),
    )
    assert stopped.returncode == 0, stopped.stderr
    for process in [cluster.head, *cluster.workers]:
        assert process.wait(20) == 0
