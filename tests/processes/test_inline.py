"""Short tasks run inline on a worker's loop; tasks that submit work or overrun do not."""

from __future__ import annotations

import threading

import pytest

import dista_runtime as dista
from dista_runtime._execution.inline import InlinePolicy, RunOnThread
from tests.support import tasks


def f() -> None:
    pass


def g() -> None:
    pass


def run(
    policy: InlinePolicy, fn: object, elapsed: int, *, inline: bool = False, use: bool = False
) -> None:
    policy.begin(inline)
    if use:
        policy.session_used()
    policy.end(fn, elapsed)  # type: ignore[arg-type]


def test_a_function_earns_inline_after_its_warmup() -> None:
    policy = InlinePolicy(budget_ns=1000, warmup=3)
    for _ in range(2):
        run(policy, f, 10)
        assert not policy.may_inline(f)
    run(policy, f, 10)
    assert policy.may_inline(f)
    assert not policy.may_inline(g)  # per function


def test_two_overruns_in_a_row_send_it_back_to_threads_until_it_earns_it_again() -> None:
    policy = InlinePolicy(budget_ns=1000, warmup=2, hard_limit_ns=10_000)
    run(policy, f, 10)
    run(policy, f, 10)
    assert policy.may_inline(f)
    run(policy, f, 5000, inline=True)  # once: likely the process being preempted
    assert policy.may_inline(f)
    run(policy, f, 10, inline=True)
    run(policy, f, 5000, inline=True)
    assert policy.may_inline(f)
    run(policy, f, 5000, inline=True)  # twice in a row: it is slow
    assert not policy.may_inline(f)
    run(policy, f, 10)
    run(policy, f, 10)
    assert policy.may_inline(f)
    run(policy, f, 20_000, inline=True)  # over the hard limit: at once
    assert not policy.may_inline(f)


def test_session_use_on_a_thread_bans_it_for_good() -> None:
    policy = InlinePolicy(budget_ns=1000, warmup=1)
    run(policy, f, 10, use=True)
    for _ in range(5):
        run(policy, f, 10)
    assert not policy.may_inline(f)


def test_session_use_inline_stops_the_task() -> None:
    policy = InlinePolicy(budget_ns=1000, warmup=1)
    run(policy, f, 10)
    policy.begin(True)
    with pytest.raises(RunOnThread):
        policy.session_used()
    assert policy.stopped()
    policy.forbid(f)
    assert not policy.may_inline(f)
    policy.session_used()  # outside a task: nothing to stop


def test_runs_are_tracked_per_thread() -> None:
    policy = InlinePolicy(budget_ns=1000, warmup=1)
    policy.begin(True)  # an inline task on this thread...
    errors: list[BaseException] = []

    def other() -> None:  # ...does not make another thread's task inline
        policy.begin(False)
        try:
            policy.session_used()
        except BaseException as e:
            errors.append(e)
        policy.end(g, 10)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert errors == []
    assert not policy.may_inline(g)  # it used the session


def _inline_runs_everywhere(workers: int = 2) -> int:
    """Every worker's count of inline runs (probes go out in batches to reach them all)."""
    counts: dict[int, int] = {}
    for _ in range(50):
        for pid, runs in dista.get([tasks.inline_runs.remote() for _ in range(8)], timeout=30):
            counts[pid] = max(runs, counts.get(pid, 0))
        if len(counts) == workers:
            return sum(counts.values())
    raise AssertionError(f"probes reached only {len(counts)} of {workers} workers")


def test_quick_tasks_run_inline_on_a_real_worker(cluster: dista.Cluster) -> None:
    before = _inline_runs_everywhere()
    values = dista.get([tasks.add.remote(i, i) for i in range(2000)], timeout=60)
    assert values == [2 * i for i in range(2000)]
    assert _inline_runs_everywhere() >= before + 1000


def test_a_learnt_leaf_that_later_submits_work_still_gives_the_right_answer(
    cluster: dista.Cluster,
) -> None:
    # Many leaf calls first: each worker learns to run this function inline...
    assert sum(dista.get([tasks.leaf_or_nested.remote(1) for _ in range(200)])) == 200
    # ...then calls that submit and block must move to a thread, not hang the loop. (Depth
    # 3 at most: a blocked task still holds its head slot, and there are four.)
    assert tasks.leaf_or_nested.remote(3).get(timeout=60) == 2
    for _ in range(4):
        assert tasks.leaf_or_nested.remote(2).get(timeout=60) == 1


def test_a_learnt_leaf_that_swallows_the_stop_is_still_run_again(cluster: dista.Cluster) -> None:
    assert sum(dista.get([tasks.leaf_or_swallowing.remote(1) for _ in range(200)])) == 200
    assert tasks.leaf_or_swallowing.remote(5).get(timeout=60) == 6


def test_an_overrunning_inline_task_does_not_stall_others(cluster: dista.Cluster) -> None:
    assert dista.get([tasks.quick_or_slow.remote(0.0) for _ in range(100)]) == [0.0] * 100
    slow = tasks.quick_or_slow.remote(0.5)
    quick = [tasks.add.remote(1, 1) for _ in range(20)]
    assert dista.get(quick, timeout=30) == [2] * 20
    assert slow.get(timeout=30) == 0.5


def test_code_that_names_the_session_is_never_inlined() -> None:
    from dista_runtime._execution.inline import InlinePolicy

    def plain(x: int) -> int:
        return {"x": x}.get("x", 0)

    def nests(x: int) -> int:
        import dista_runtime as dista

        if x > 10:
            return dista.get(nests.remote(x - 1))  # type: ignore[attr-defined, no-any-return]
        return x

    policy = InlinePolicy()
    for function in (plain, nests):
        for _ in range(policy.warmup):
            policy.begin(False)
            policy.end(function, 1000)
    assert policy.may_inline(plain)
    assert not policy.may_inline(nests)
