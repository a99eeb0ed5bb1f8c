"""`remote_call`: any picklable callable runs on the cluster without being registered."""

from __future__ import annotations

import functools
import operator
import threading
from typing import Any

import pytest

import dista_runtime as dista
from dista_runtime._api.calls import remote_call
from dista_runtime._values import registry

pytestmark = pytest.mark.timeout(60)


class _Adder:
    def __init__(self, k: int) -> None:
        self.k = k

    def add(self, x: int) -> int:
        return x + self.k


def _square(x: int) -> int:
    return x * x


def test_callables_of_every_kind_run(cluster: dista.Cluster) -> None:
    names_before = registry.snapshot()
    offset = 5

    def local(x: int) -> int:  # a closure: travels by value
        return x + offset

    adder = _Adder(10)
    assert remote_call(_square, (7,)).get(30) == 49
    assert remote_call(lambda x: x * 3, (4,)).get(30) == 12
    assert remote_call(local, (1,)).get(30) == 6
    assert remote_call(functools.partial(operator.mul, 6), (7,)).get(30) == 42
    assert remote_call(abs, (-3,)).get(30) == 3
    assert remote_call(adder.add, (1,)).get(30) == 11
    adder.k = 20  # a bound method is pickled at each call: its state now
    assert remote_call(adder.add, (1,)).get(30) == 21
    assert remote_call(sorted, ([3, 1, 2],), {"reverse": True}).get(30) == [3, 2, 1]
    # Nothing joined the registry: the driver's registry hash is what it was.
    assert registry.snapshot() == names_before


def test_refs_among_the_arguments_are_inputs(cluster: dista.Cluster) -> None:
    first = remote_call(_square, (3,))
    assert remote_call(lambda xs: sum(xs), ([first, first],)).get(30) == 18


def test_errors_are_the_callers(cluster: dista.Cluster) -> None:
    with pytest.raises(ZeroDivisionError):
        remote_call(operator.truediv, (1, 0)).get(30)
    with pytest.raises(TypeError, match="is not callable"):
        remote_call(42, ())  # type: ignore[arg-type]
    lock = threading.Lock()

    def holds_a_lock() -> Any:
        return lock

    with pytest.raises(TypeError, match="cannot be sent to a worker"):
        remote_call(holds_a_lock, ())
