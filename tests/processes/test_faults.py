"""Everyday faults on real processes: tasks that exit, nest, get cancelled, or run long.

Each test starts its own local cluster (a head in this process, worker processes) and
checks what a user sees: values, errors, which tasks ran, how long it took, that the
workers survived. Timing margins are wide: the machine is small and noisy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dista_runtime as dista
from dista_runtime._values.buffer_cache import IDLE_S
from tests.support import fault_tasks as ft
from tests.support.cluster import assert_gone, settle_to_zero, wait_for_workers


def _cluster(workers: int) -> Iterator[dista.Cluster]:
    with dista.init(workers=workers) as c:
        wait_for_workers(workers)
        yield c
    assert_gone(c.pids())


@pytest.fixture
def one() -> Iterator[dista.Cluster]:
    yield from _cluster(1)


@pytest.fixture
def two() -> Iterator[dista.Cluster]:
    yield from _cluster(2)


def _wait_for_file(path: Path, timeout: float = 10.0) -> None:
    """Until a task has left its marker (it started)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path.name} after {timeout} s"
        time.sleep(0.02)


# -- a task can't take its worker down ---------------------------------------------------------


def test_sys_exit_and_keyboard_interrupt_fail_only_their_task(two: dista.Cluster) -> None:
    pids = sorted(two.pids())
    refs = [ft.exits.remote(2), ft.exits.remote(3), ft.interrupts_itself.remote()]
    for ref, what in zip(refs, ["sys.exit(2)", "sys.exit(3)", "KeyboardInterrupt"], strict=True):
        with pytest.raises(dista.TaskError) as caught:
            ref.get(timeout=30)
        assert what in str(caught.value)
        assert not isinstance(caught.value, (SystemExit, KeyboardInterrupt))
    # Every runner survived: more work than threads still runs, on the same processes.
    assert sorted(set(dista.get([ft.pid.remote() for _ in range(20)], timeout=30))) == pids
    assert dista.stats().workers == 2
    assert sorted(two.pids()) == pids


# -- nested gets never deadlock ------------------------------------------------------------------


def test_fib_10_with_every_call_a_task_finishes_on_two_workers(two: dista.Cluster) -> None:
    assert ft.fib.remote(10).get(timeout=120) == 55
    settle_to_zero()


def test_async_fib_10_with_every_call_awaiting_its_children_finishes(two: dista.Cluster) -> None:
    assert ft.afib.remote(10).get(timeout=120) == 55
    settle_to_zero()


# -- cancel means never runs --------------------------------------------------------------------


def test_cancel_withdraws_tasks_a_worker_holds_and_interrupts_the_running_one(
    one: dista.Cluster, tmp_path: Path
) -> None:
    marks = [tmp_path / name for name in "ABC"]
    refs = [ft.nap.remote(5.0 if i == 0 else 0.2, str(m)) for i, m in enumerate(marks)]
    _wait_for_file(marks[0])  # A runs; B waits in the worker's second slot, C at the head
    time.sleep(0.3)
    began = time.monotonic()
    for ref in refs:
        ref.cancel()
    for ref in refs:
        with pytest.raises(dista.TaskCancelledError):
            ref.get(timeout=10)
    # A was interrupted in its sleep: the worker is free long before A's 5 s.
    assert ft.quick.remote().get(timeout=10) in one.pids()
    assert time.monotonic() - began < 3.0
    time.sleep(0.5)
    assert not marks[1].exists(), "B was cancelled while its worker held it, yet it ran"
    assert not marks[2].exists(), "C was cancelled before dispatch, yet it ran"
    del refs, ref
    settle_to_zero()


def test_cancel_interrupts_running_python_code(one: dista.Cluster, tmp_path: Path) -> None:
    mark = tmp_path / "spin"
    ref = ft.spin.remote(60.0, str(mark))
    _wait_for_file(mark)
    began = time.monotonic()
    ref.cancel()
    with pytest.raises(dista.TaskCancelledError):
        ref.get(timeout=10)
    assert ft.quick.remote().get(timeout=10) == one.pids()[0]  # the same, living worker
    assert time.monotonic() - began < 5.0


# -- no idle worker while work waits ------------------------------------------------------------


def test_tasks_right_after_init_spread_over_both_workers() -> None:
    with dista.init(workers=2) as c:
        began = time.monotonic()
        pids = dista.get([ft.nap.remote(1.0) for _ in range(2)], timeout=30)
        took = time.monotonic() - began
        assert sorted(pids) == sorted(c.pids())
        assert took < 1.8, f"2 x 1 s tasks on 2 workers took {took:.2f} s"
    assert_gone(c.pids())


def test_long_calls_of_a_function_known_as_short_do_not_queue_on_one_worker(
    two: dista.Cluster,
) -> None:
    dista.get([ft.nap.remote(0.0) for _ in range(20)], timeout=30)  # now "short"
    began = time.monotonic()
    pids = dista.get([ft.nap.remote(1.0) for _ in range(4)], timeout=30)
    took = time.monotonic() - began
    assert sorted(set(pids)) == sorted(two.pids())
    assert took < 3.0, f"4 x 1 s tasks on 2 workers took {took:.2f} s (ideal 2 s)"


# -- memory ---------------------------------------------------------------------------------------


def test_a_finished_tasks_argument_is_freed(one: dista.Cluster) -> None:
    before = ft.rss.remote().get(timeout=30)
    data = os.urandom(1 << 20) * 200  # 200 MiB
    assert ft.big_argument.remote(data).get(timeout=60) == len(data)
    del data
    # The worker keeps the map the argument landed in for the next large receive, and
    # gives it back once nothing has used it for IDLE_S seconds (`_buffer_cache`).
    deadline = time.monotonic() + IDLE_S + 5.0
    while (after := ft.rss.remote().get(timeout=30)) - before >= 100 << 20:
        assert time.monotonic() < deadline, f"the worker grew {(after - before) >> 20} MiB"
        time.sleep(0.5)


def test_force_cancel_ends_the_worker_stuck_in_c_code_and_a_new_one_takes_over(
    one: dista.Cluster, tmp_path: Path
) -> None:
    mark = tmp_path / "stuck"
    ref = ft.stuck_in_c.remote(60, str(mark))
    _wait_for_file(mark)
    stuck = int(mark.read_text())
    began = time.monotonic()
    ref.cancel(force=True)
    with pytest.raises(dista.TaskCancelledError):
        ref.get(timeout=10)
    assert_gone([stuck], timeout=10)
    fresh = ft.quick.remote().get(timeout=30)
    assert fresh != stuck and one.pids() == [fresh]
    assert time.monotonic() - began < 15
    del ref
    settle_to_zero()


def test_an_error_read_through_a_nested_task_keeps_its_type(two: dista.Cluster) -> None:
    assert ft.outer_check.remote(2).get(timeout=30) == 3
    with pytest.raises(ft.Odd) as caught:
        ft.outer_check.remote(3).get(timeout=30)
    assert isinstance(caught.value, dista.TaskError)
    assert caught.value.value == 3
    text = str(caught.value)
    assert "3 is odd" in text and "outer_check" in text and "check_even" in text


def test_a_short_task_that_sometimes_nests_runs_once_per_call(
    one: dista.Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "steps"
    for i in range(8):  # short, self-contained runs: what the worker would run inline
        assert ft.step.remote(i, False, str(log)).get(timeout=30) == i
    assert ft.step.remote(99, True, str(log)).get(timeout=30) == 99
    assert log.read_text().split() == [*map(str, range(8)), "99"]  # 99 ran once
