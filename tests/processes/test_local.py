"""The user API end to end on a real local cluster: processes on loopback."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import dista_runtime as dista
from tests.support import tasks
from tests.support.cluster import alive, settle_to_zero


def test_values_and_refs_as_arguments(cluster: dista.Cluster) -> None:
    one = tasks.add.remote(1, 2)
    assert one.get(timeout=10) == 3
    chained = tasks.add.remote(one, 10)
    assert chained.get(timeout=10) == 13
    nested = tasks.total.remote([one, chained, 5], extra={"x": one})
    assert nested.get(timeout=10) == 3 + 13 + 5 + 3
    assert tasks.unwrap.remote(tasks.Custom(chained)).get(timeout=10) == 13
    q, r = tasks.divmod_task.remote(17, 5)
    assert (q.get(timeout=10), r.get(timeout=10)) == (3, 2)
    assert dista.get([tasks.add.remote(i, i) for i in range(50)]) == [2 * i for i in range(50)]


def test_chain_never_waits_on_the_driver(cluster: dista.Cluster) -> None:
    ref = tasks.add.remote(0, 1)
    for _ in range(300):
        ref = tasks.add.remote(ref, 1)
    assert ref.get(timeout=30) == 301


def test_errors_come_back_typed(cluster: dista.Cluster) -> None:
    with pytest.raises(tasks.Refusal) as caught:
        tasks.fail.remote(7).get(timeout=10)
    assert isinstance(caught.value, dista.TaskError)
    assert caught.value.code == 7
    assert "Refusal" in caught.value.type_name
    assert "raise Refusal(code)" in caught.value.remote_traceback
    with pytest.raises(dista.TaskError) as plain:
        tasks.fail_unpicklable.remote().get(timeout=10)
    assert "cannot travel" in str(plain.value)
    # A failed input fails its dependents, naming it.
    with pytest.raises(dista.TaskError, match="failed"):
        tasks.add.remote(tasks.fail.remote(1), 1).get(timeout=10)


def test_unpicklable_argument_is_named() -> None:
    with pytest.raises(TypeError, match=r"argument 1 of .*add.*cannot be pickled"):
        dista.init  # noqa: B018  (no cluster needed: encoding fails first)
        from dista_runtime._values.codec import encode_call

        encode_call((1, threading.Lock()), {}, dista.ObjectRef, "tests.support.tasks:add")


def test_by_value_functions(cluster: dista.Cluster) -> None:
    offset = 100

    @dista.task
    def local_add(a: int) -> int:
        return a + offset

    assert local_add.remote(1).get(timeout=10) == 101
    assert local_add.remote(tasks.add.remote(1, 1)).get(timeout=10) == 102


def test_tasks_submit_tasks(cluster: dista.Cluster) -> None:
    assert tasks.nested_sum.remote(20).get(timeout=30) == sum(range(20)) + 20


def test_async_tasks_and_awaiting_refs(cluster: dista.Cluster) -> None:
    async def main() -> int:
        a = await tasks.async_add.remote(1, 2)
        b = await tasks.add.remote(a, 1)
        return b

    assert asyncio.run(main()) == 4


def test_wait_and_as_completed(cluster: dista.Cluster) -> None:
    slow = tasks.sleep_then.remote(1.0, 1)
    fast = tasks.add.remote(1, 1)
    done, pending = dista.wait([slow, fast], num_returns=1, timeout=10)
    assert done == [fast] and pending == [slow]
    order = list(dista.as_completed([slow, tasks.add.remote(2, 2)], timeout=10))
    assert order[-1] == slow
    with pytest.raises(dista.GetTimeoutError):
        tasks.sleep_then.remote(2.0, 1).get(timeout=0.1)


def test_cancel(cluster: dista.Cluster) -> None:
    blockers = [tasks.sleep_then.remote(0.5, i) for i in range(4)]
    victim = tasks.add.remote(1, 1)
    victim.cancel()
    with pytest.raises(dista.TaskCancelledError):
        victim.get(timeout=10)
    assert dista.get(blockers, timeout=10) == [0, 1, 2, 3]


def test_300_mib_result_crosses_in_parts(cluster: dista.Cluster) -> None:
    ref = tasks.big.remote(300)
    array = ref.get(timeout=60)
    expected = np.random.default_rng(300).integers(0, 255, size=300 << 20, dtype=np.uint8)
    assert array.nbytes == 300 << 20
    assert np.array_equal(array, expected)
    # And as an argument, fetched by a worker from another (or its own) store.
    assert tasks.checksum.remote(ref).get(timeout=60) == int(expected.sum(dtype=np.int64))


def test_a_large_argument_arrives_whole(cluster: dista.Cluster) -> None:
    # 48 MiB from the driver: read into place by the head, forwarded, read into place by
    # the worker; several at once, so that they interleave with small frames.
    arrays = [
        np.random.default_rng(i).integers(0, 255, size=48 << 20, dtype=np.uint8) for i in range(3)
    ]
    refs = [tasks.checksum.remote(a) for a in arrays]
    small = [tasks.add.remote(i, 1) for i in range(50)]
    assert dista.get(refs, timeout=60) == [int(a.sum(dtype=np.int64)) for a in arrays]
    assert dista.get(small, timeout=60) == [i + 1 for i in range(50)]


def test_released_refs_free_everything(cluster: dista.Cluster) -> None:
    refs = [tasks.big.remote(1) for _ in range(6)] + [tasks.add.remote(i, 1) for i in range(100)]
    dista.get(refs, timeout=30)
    assert dista.stats().objects >= len(refs)
    del refs
    settle_to_zero()
    stores = dict(dista.get([tasks.worker_store.remote() for _ in range(8)], timeout=10))
    assert set(stores.values()) == {0}, stores


def test_timeline_records_our_tasks(cluster: dista.Cluster) -> None:
    dista.timeline()  # take what earlier tests left
    dista.get([tasks.add.remote(i, 1) for i in range(10)], timeout=10)
    records = dista.timeline()
    assert len(records) == 10
    assert all(r.submitted <= r.dispatched <= r.settled for r in records)
    trace = dista.chrome_trace(records)
    assert trace["traceEvents"]


def test_worker_killed_mid_task_is_retried(cluster: dista.Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    ref = tasks.sleep_then.remote(2.0, 42, str(marker))
    deadline = time.monotonic() + 10
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    victim = int(marker.read_text())
    assert victim in cluster.pids()
    os.kill(victim, signal.SIGKILL)
    assert ref.get(timeout=30) == 42
    assert int(marker.read_text()) != victim  # it ran again, elsewhere
    assert not alive(victim)
