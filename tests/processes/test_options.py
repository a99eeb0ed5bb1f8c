"""``f.options(max_retries=..., num_returns=..., name=...)``: per call, as Ray's, leaving
``f`` as it was; a named call (and a callable run undecorated) is named so in the timeline."""

from __future__ import annotations

import os
import signal

import pytest

import dista_runtime as dista
from dista_runtime._api.calls import remote_call
from tests.support import tasks

pytestmark = pytest.mark.timeout(60)


@dista.task
def die() -> int:
    """Kills its own worker: a lost worker, which the head retries up to max_retries."""
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


@dista.task
def halves(n: int) -> tuple[int, int]:
    return n // 2, n - n // 2


def test_max_retries_per_call(cluster: dista.Cluster) -> None:
    with pytest.raises(dista.TaskError, match="gave up after 1 attempt"):
        die.options(max_retries=0).remote().get(timeout=30)
    with pytest.raises(dista.TaskError, match="gave up after 2 attempts"):
        die.options(max_retries=1).remote().get(timeout=30)
    assert die.max_retries is None  # the task itself is as it was


def test_num_returns_per_call(cluster: dista.Cluster) -> None:
    low, high = halves.options(num_returns=2).remote(7)
    assert (low.get(timeout=30), high.get(timeout=30)) == (3, 4)
    assert halves.remote(7).get(timeout=30) == (3, 4)  # one result, a tuple, as declared


def test_names_in_the_timeline(cluster: dista.Cluster) -> None:
    dista.timeline()  # what came before
    named = tasks.add.options(name="summing").remote(1, 2)
    plain = tasks.add.remote(3, 4)
    lambda_ref = remote_call(lambda x: x + 1, (1,))
    assert [named.get(timeout=30), plain.get(timeout=30), lambda_ref.get(timeout=30)] == [3, 7, 2]
    records = []
    for _ in range(50):  # records reach the head's timeline when the tasks settle there
        records += dista.timeline()
        if len(records) >= 3:
            break
    trace = dista.chrome_trace(records)
    events: list[dict[str, object]] = trace["traceEvents"]  # type: ignore[assignment]
    names = {e["name"] for e in events if e.get("ph") == "X"}
    lambda_name = f"{__name__}.test_names_in_the_timeline.<locals>.<lambda>"
    assert {"summing", "tests.support.tasks.add", lambda_name} <= names, names
