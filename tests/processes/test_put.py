"""`dista.put`: a value stored once on a worker, read by any number of tasks.

The driver sends the value once, as the argument of a built-in task (`dista:put`) that
every worker knows; the worker keeps the bytes it received as the task's result, as they
came. Tasks given the ref read it from that worker's store, never from the driver again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import dista_runtime as dista
from dista_runtime._session.session import Session
from tests.support import tasks
from tests.support.cluster import settle_to_zero


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The bytes of every argument this driver submits, counted as it submits them."""
    count = [0, 0]  # bytes, submissions
    submit = Session.submit

    def counting(self: Session, task_id: int, argument: Any, inputs: Any, results: int) -> int:
        count[0] += len(argument)
        count[1] += 1
        return submit(self, task_id, argument, inputs, results)

    monkeypatch.setattr(Session, "submit", counting)
    yield count


def test_get_of_put_is_the_value(cluster: dista.Cluster) -> None:
    values: list[object] = [0, "text", None, (1, 2.5), {"a": [1, 2]}, b"\x00" * 100]
    refs = [dista.put(v) for v in values]
    assert dista.get(refs, timeout=30) == values
    array = np.arange(1 << 18)  # 2 MiB: stays on its worker
    ref = dista.put(array)
    got = ref.get(timeout=30)
    assert got.dtype == array.dtype and np.array_equal(got, array)
    assert tasks.checksum.remote(ref).get(timeout=30) == int(array.sum())
    assert tasks.add.remote(dista.put(2), dista.put(3)).get(timeout=30) == 5


def test_a_large_value_crosses_once(cluster: dista.Cluster, sent: list[int]) -> None:
    array = np.random.default_rng(7).integers(0, 255, size=100 << 20, dtype=np.uint8)
    expected = int(array.sum(dtype=np.int64))
    ref = dista.put(array)
    assert sent == [pytest.approx(100 << 20, abs=4096), 1]
    refs = [tasks.checksum.remote(ref) for _ in range(10)]
    assert dista.get(refs, timeout=120) == [expected] * 10
    # Ten tasks cost ten small submissions: the array went once.
    assert sent[1] == 11 and sent[0] < (100 << 20) + 10 * 4096, sent
    del ref, refs
    settle_to_zero()  # the stored array is freed once its refs are gone


def test_put_values_are_released(cluster: dista.Cluster) -> None:
    refs = [dista.put(bytes(n)) for n in (10, 100 << 10, 3 << 20)]
    assert [len(b) for b in dista.get(refs, timeout=30)] == [10, 100 << 10, 3 << 20]
    assert dista.stats().objects >= 3
    del refs
    settle_to_zero()


def test_put_refuses_refs_and_unpicklable_values(cluster: dista.Cluster) -> None:
    import threading

    ref = dista.put(1)
    with pytest.raises(TypeError, match=r"the value given to dista\.put .*cannot be pickled"):
        dista.put([ref])
    with pytest.raises(TypeError, match="cannot be pickled"):
        dista.put(threading.Lock())
    assert ref.get(timeout=10) == 1


def test_put_inside_a_task(cluster: dista.Cluster) -> None:
    @dista.task
    def store_and_sum(n: int) -> int:
        stored = dista.put(list(range(n)))
        return int(tasks.total.remote(stored).get(timeout=30))

    assert store_and_sum.remote(100).get(timeout=30) == sum(range(100))
