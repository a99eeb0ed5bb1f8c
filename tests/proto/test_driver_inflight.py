"""A driver's core counts the argument bytes it keeps for unfinished work (`inflight_bytes`):
from submission until the task's needed results are answered, through a lost head and a
resume; an actor call's until it is answered. The runtime's backpressure reads this count."""

from __future__ import annotations

import dista_proto as dp

MiB = 1 << 20


def _welcomed(number: int = 2, epoch: int = 0x51) -> dp.Driver:
    core = dp.Driver(registry_hash=1)
    core.start(0)
    core.decisions()
    _from_head(core, dp.Welcome(number, epoch))
    core.decisions()
    return core


def _from_head(core: dp.Driver, event: dp.Event) -> None:
    core.receive_data(dp.HEAD_LINK, dp.encode_event(event, from_head=True), 0)


def _sent(core: dp.Driver) -> bytes:
    return b"".join(
        bytes(b) for d in core.decisions() if isinstance(d, dp.Write) for b in d.buffers
    )


def test_a_task_counts_its_argument_until_it_is_answered() -> None:
    core = _welcomed()
    a = core.submit(7, b"x" * MiB)
    b = core.submit(7, memoryview(bytearray(3 * MiB)))
    assert core.inflight_bytes == 4 * MiB
    _from_head(core, dp.Result(a, b"ok"))
    assert core.inflight_bytes == 3 * MiB
    _from_head(core, dp.Error(b, "boom"))
    assert core.inflight_bytes == 0


def test_a_stored_answer_counts_as_answered_and_a_repeat_counts_nothing() -> None:
    core = _welcomed()
    a = core.submit(7, b"x" * 1000)
    _from_head(core, dp.Located(a, dp.Address("127.0.0.1", 9)))
    assert core.inflight_bytes == 0
    _from_head(core, dp.Result(a, b"again"))
    assert core.inflight_bytes == 0


def test_a_task_many_counts_until_its_last_result() -> None:
    core = _welcomed()
    a = core.submit_many(7, b"y" * 500, 3)
    _from_head(core, dp.Result(a, b"1"))
    _from_head(core, dp.Result(a + 1, b"2"))
    assert core.inflight_bytes == 500
    _from_head(core, dp.Result(a + 2, b"3"))
    assert core.inflight_bytes == 0


def test_a_task_after_counts_its_value_and_a_released_unanswered_task_stops_counting() -> None:
    core = _welcomed()
    a = core.submit(7, b"a" * 100)
    b = core.submit_after(7, [a], gather=True, value=b"v" * 400)
    assert core.inflight_bytes == 500
    core.release(b)  # nobody needs its result: its frame is not kept any more
    assert core.inflight_bytes == 100
    _from_head(core, dp.Result(a, b"done"))
    assert core.inflight_bytes == 0


def test_kept_bytes_survive_a_lost_head_and_go_once_the_resumed_tasks_are_answered() -> None:
    core = _welcomed()
    a = core.submit(7, b"z" * 2000)
    _sent(core)
    core.connection_lost(dp.HEAD_LINK, 0)
    assert core.inflight_bytes == 2000  # kept for the new head
    core.start(0)
    core.decisions()
    _from_head(core, dp.Welcome(2, 0x99))
    assert b"z" * 2000 in _sent(core)  # sent again with the resume
    assert core.inflight_bytes == 2000
    _from_head(core, dp.Result(a, b"ok"))
    assert core.inflight_bytes == 0


def test_a_cancelled_task_stops_counting_when_its_cancel_is_answered() -> None:
    core = _welcomed()
    a = core.submit(7, b"c" * 300)
    core.cancel(a)
    assert core.inflight_bytes == 300  # the head may still run it: kept until it says
    _from_head(core, dp.Error(a, "cancelled"))
    assert core.inflight_bytes == 0


def test_an_actor_call_counts_until_answered_and_not_while_it_is_kept_for_a_resume() -> None:
    core = _welcomed()
    actor = core.create_actor(5, b"init")
    _from_head(core, dp.Result(actor, b""))
    call = core.call_actor(actor, 3, b"q" * 700)
    assert core.inflight_bytes == 700
    _from_head(core, dp.Result(call, b"r"))
    assert core.inflight_bytes == 0
    assert core.kept(actor) == 1  # still kept for a new head, under its own budget
