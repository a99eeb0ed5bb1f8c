"""A worker's hello says whether it has a checkpoint store (`HELLO_CHECKPOINTS`, Dista's mark
in the hello's task-ID field), beside its other marks; and the task ID an actor call's
timeline record carries (`actor_call_task_id`) names its class and method together."""

from __future__ import annotations

import pytest

import dista_proto as dp
from dista_proto import frame as F


def _hello(**worker: bool) -> dp.Hello:
    core = dp.Worker(registry_hash=9, address=dp.Address("127.0.0.1", 1), **worker)
    core.start(0)
    head = dp.Connection(dp.Role.HEAD)
    for d in core.decisions():
        if isinstance(d, dp.Write) and d.link == dp.HEAD_LINK:
            head.receive_data(b"".join(bytes(b) for b in d.buffers))
    (hello,) = [e for e in head.next_events() if isinstance(e, dp.Hello)]
    return hello


@pytest.mark.parametrize(
    ("worker", "mark"),
    [
        ({"runs_ahead": False}, 0),
        ({}, dp.HELLO_RUNS_AHEAD),
        ({"checkpoints": True, "runs_ahead": False}, dp.HELLO_CHECKPOINTS),
        ({"checkpoints": True, "accept_by_value": True}, 16 | 4 | 2),
        ({"accept_by_value": True, "runs_ahead": False}, dp.HELLO_ANY_REGISTRY),
    ],
)
def test_a_workers_hello_marks_its_checkpoint_store(worker: dict[str, bool], mark: int) -> None:
    hello = _hello(**worker)
    assert hello.mark == mark and hello.role == F.ROLE_WORKER
    # Distinct from the other hello marks: a head reads each bit alone.
    marks = (dp.HELLO_SECRET, dp.HELLO_ANY_REGISTRY, dp.HELLO_CHECKPOINTS, dp.HELLO_HOSTS_ACTOR)
    assert len({*marks, dp.HELLO_RUNS_AHEAD}) == 5 and sum(marks) & dp.HELLO_RUNS_AHEAD == 0


def test_the_head_knows_which_workers_have_a_store() -> None:
    head = dp.Head(epoch=1, first_number=1)
    for port, store in ((1, True), (2, False)):
        link = head.connection_made(0)
        core = dp.Worker(registry_hash=9, address=dp.Address("127.0.0.1", port), checkpoints=store)
        core.start(0)
        for d in core.decisions():
            if isinstance(d, dp.Write):
                head.receive_data(link, b"".join(bytes(b) for b in d.buffers), 0)
    lines = [x for x in head.status().splitlines() if x.startswith("worker ")]
    assert len(lines) == 2
    assert lines[0].startswith("worker 127.0.0.1:1: ")
    assert lines[0].endswith(f"registry {9:#018x}, checkpoint store")
    assert lines[1].endswith(f"registry {9:#018x}, no checkpoint store")


def test_an_actor_calls_timeline_task_id_names_class_and_method_together() -> None:
    a, b, add, get = 0x1111, 0x2222, 0x3333, 0x4444
    ids = {dp.actor_call_task_id(t, m) for t in (a, b) for m in (add, get)}
    assert len(ids) == 4  # the method alone would name no class
    assert all(0 <= i <= dp.TASK_ID_MASK for i in ids)
    assert dp.actor_call_task_id(a, add) == dp.actor_call_task_id(a, add)  # stable
    # The type ID's retry marks (above TASK_ID_MASK) do not change it.
    assert dp.actor_call_task_id(a | 3 << dp.TASK_ID_BITS, add) == dp.actor_call_task_id(a, add)
