"""How a worker rebuilds a call from a RunTask: by name, by value, and task-after forms."""

from __future__ import annotations

import cloudpickle
import pytest

import dista_proto as dp
from dista_runtime._execution.call import Calls, encode_results
from dista_runtime._values.codec import decode, encode, encode_call
from dista_runtime._values.ids import BY_VALUE_NAME, task_id
from dista_runtime._values.registry import by_value_argument, digest_of
from tests.support import tasks


def run(task: dp.RunTask) -> object:
    return Calls().prepare(task).run()


def test_plain_call_by_name() -> None:
    argument, inputs = encode_call((2, 3), {}, object, "add")
    assert inputs == []
    assert run(dp.RunTask(1, task_id("tests.support.tasks:add"), 1, argument)) == 5


def test_task_after_without_a_value_passes_the_inputs() -> None:
    total = task_id("tests.support.tasks:total")
    gathered = dp.RunTask(1, total, 1, None, (encode(1), encode(2)), gather=True, after=True)
    assert run(gathered) == 3
    single = dp.RunTask(
        1, task_id("tests.support.tasks:unwrap"), 1, None, (encode(tasks.Custom(7)),), after=True
    )
    assert run(single) == 7


def test_by_value_functions_are_cached_by_digest() -> None:
    calls = []

    def scaled(x: int) -> int:
        calls.append(x)
        return x * 10

    pickled = cloudpickle.dumps(scaled)
    call, _ = encode_call((4,), {}, object, "scaled")
    argument = by_value_argument(digest_of(pickled), pickled, call)
    calls = Calls()
    task = dp.RunTask(1, task_id(BY_VALUE_NAME), 1, argument)
    assert calls.prepare(task).run() == 40
    assert calls.prepare(task).function is calls.prepare(task).function


def test_unknown_task_says_what_to_import() -> None:
    with pytest.raises(LookupError, match="--import"):
        Calls().prepare(dp.RunTask(1, task_id("nowhere:nothing"), 1, b""))


def test_num_returns_checks_the_count() -> None:
    assert [decode(v) for v in encode_results((1, "a"), 2)] == [1, "a"]
    with pytest.raises(TypeError, match="must return 2 values, not 3 values"):
        encode_results((1, 2, 3), 2)
