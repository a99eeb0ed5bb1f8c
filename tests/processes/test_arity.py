"""A ``.remote()`` call whose arguments do not bind to the function raises TypeError at
once, naming the task or method and its parameters, as calling the function would; calls
that bind (defaults, keywords, ``*args``, refs) run as before. On a real local cluster."""

from __future__ import annotations

import pytest

import dista_runtime as dista
from tests.support import tasks


@dista.task
def spread(first: int, *rest: int, scale: int = 1) -> int:
    return (first + sum(rest)) * scale


@dista.task
def keyed(a: int, *, key: str) -> str:
    return f"{a}{key}"


@dista.actor
class Tally:
    def __init__(self, start: int, step: int = 1) -> None:
        self.value = start
        self.step = step

    def bump(self, times: int = 1) -> int:
        self.value += self.step * times
        return self.value

    @staticmethod
    def double(x: int) -> int:
        return 2 * x


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda: tasks.add.remote(1), "missing a required argument: 'b'"),
        (lambda: tasks.add.remote(1, 2, 3), "too many positional arguments"),
        (lambda: tasks.add.remote(1, 2, c=3), "got an unexpected keyword argument 'c'"),
        (lambda: tasks.add.remote(1, a=2), "multiple values for argument 'a'"),
        (lambda: keyed.remote(1), "missing a required argument: 'key'"),
        (lambda: spread.remote(), "missing a required argument: 'first'"),
    ],
)
def test_a_task_call_that_cannot_bind_raises_at_once(
    cluster: dista.Cluster, call: object, said: str
) -> None:
    with pytest.raises(TypeError, match="remote\\(\\): ") as raised:
        call()  # type: ignore[operator]
    assert said in str(raised.value)
    assert "its parameters: (" in str(raised.value), raised.value


def test_calls_that_bind_run_as_before(cluster: dista.Cluster) -> None:
    refs = [
        tasks.add.remote(1, 2),
        tasks.add.remote(1, b=2),
        tasks.add.remote(a=1, b=2),
        tasks.add.remote(tasks.add.remote(0, 1), 2),  # a ref binds as its value would
        spread.remote(1),
        spread.remote(1, 1, 1, scale=2),
        tasks.sleep_then.remote(0, 3),
    ]
    assert dista.get(refs, timeout=60) == [3, 3, 3, 3, 1, 6, 3]
    assert keyed.remote(1, key="x").get(timeout=60) == "1x"


def test_an_actor_call_that_cannot_bind_raises_at_once(cluster: dista.Cluster) -> None:
    with pytest.raises(TypeError, match=r"Tally\.remote\(\): missing a required argument") as e:
        Tally.remote()
    assert "its parameters: (start: int, step: int = 1)" in str(e.value)
    tally = Tally.remote(10, step=5)
    with pytest.raises(TypeError, match=r"Tally\.bump\.remote\(\): too many positional"):
        tally.bump.remote(1, 2)
    with pytest.raises(TypeError, match=r"Tally\.double\.remote\(\): missing a required"):
        tally.double.remote()
    # The actor is untouched by the calls refused, and takes the ones that bind.
    assert tally.bump.remote().get(timeout=60) == 15
    assert tally.bump.remote(times=2).get(timeout=60) == 25
    assert tally.double.remote(4).get(timeout=60) == 8
