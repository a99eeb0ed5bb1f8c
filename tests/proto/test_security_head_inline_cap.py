"""The per-driver cap on inline results the head keeps (docs/protocol.md "Security rules")."""

from __future__ import annotations

import pytest

import dista_proto as dp

from .support.security_peers import Net

TASK = 0x5EED


def _capped(kept: str) -> str:
    return f"driver 1 keeps {kept} of inline results in the head, its cap (DISTA_HEAD_INLINE_CAP)"


def test_past_its_cap_a_drivers_results_are_stored_on_workers_and_it_fails_readably() -> None:
    net = Net(inline_cap_bytes=1000)
    w = net.worker()
    d, other = net.driver(), net.driver()
    for n in (1, 2):  # 1,200 bytes: the second result crosses the cap and is still kept
        d.send(dp.Task(d.oid(n), TASK, b""))
        assert w.take() == [dp.Task(d.oid(n), TASK, b"")]
        w.send(dp.Result(d.oid(n), bytes(600)))
        assert d.take() == [dp.Result(d.oid(n), bytes(600))]
    assert net.head.inline_bytes(d.number) == 1200
    # At its cap, the worker is told to store the result whatever its size.
    d.send(dp.Task(d.oid(3), TASK, b""))
    assert w.take() == [dp.Free(d.oid(3), dp.FREE_STORE), dp.Task(d.oid(3), TASK, b"")]
    w.send(dp.Stored(d.oid(3), 5))
    assert d.take() == [dp.Located(d.oid(3), dp.Address("10.0.0.1", 7000))]
    # A result that comes inline anyway is not kept: the driver hears why.
    d.send(dp.Task(d.oid(4), TASK, b""))
    w.take()
    w.send(dp.Result(d.oid(4), b"small"))
    why = f"object {d.oid(4):#x}: {_capped('1000 bytes')}: release refs it no longer needs"
    assert d.take() == [dp.Error(d.oid(4), why)]
    assert net.head.inline_bytes(d.number) == 1200
    # Another driver is not touched by this one's cap.
    other.send(dp.Task(other.oid(1), TASK, b""))
    assert w.take() == [dp.Task(other.oid(1), TASK, b"")]
    w.send(dp.Result(other.oid(1), b"fine"))
    assert other.take() == [dp.Result(other.oid(1), b"fine")]
    # Releases bring the counts back to zero; below the cap, results are inline again.
    d.send(*(dp.Release(d.oid(n)) for n in (1, 2, 3, 4)))
    other.send(dp.Release(other.oid(1)))
    assert w.take() == [dp.Free(d.oid(3))]
    assert net.head.inline_bytes(d.number) == 0
    assert net.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)
    d.send(dp.Task(d.oid(5), TASK, b""))
    assert w.take() == [dp.Task(d.oid(5), TASK, b"")]


def test_a_cap_of_zero_is_off_and_a_negative_one_refused() -> None:
    net = Net(inline_cap_bytes=0)
    w = net.worker()
    d = net.driver()
    for n in range(1, 4):
        d.send(dp.Task(d.oid(n), TASK, b""))
        assert w.take() == [dp.Task(d.oid(n), TASK, b"")]  # never marked
        w.send(dp.Result(d.oid(n), bytes(1 << 20)))
    assert net.head.stats().held_bytes == 3 << 20
    with pytest.raises(ValueError, match="inline_cap_bytes"):
        dp.Head(epoch=1, first_number=1, inline_cap_bytes=-1)


def test_a_worker_told_to_store_stores_a_small_result() -> None:
    core = dp.Worker(registry_hash=1, address=dp.Address("10.0.0.9", 7000))
    core.start(0)
    core.decisions()
    oid = 1 << dp.ID_BITS | 1
    frames = dp.encode_event(dp.Free(oid, dp.FREE_STORE), from_head=True) + dp.encode_event(
        dp.Task(oid, TASK, b"arg"), from_head=True
    )
    core.receive_data(dp.HEAD_LINK, frames, 1)
    assert [type(d) for d in core.decisions()] == [dp.RunTask]
    core.task_done(oid, [b"tiny"], 2, 3)
    (write,) = core.decisions()
    assert isinstance(write, dp.Write)
    data = b"".join(bytes(b) for b in write.buffers)
    assert dp.encode_event(dp.Stored(oid, 4)) in data
    assert core.store[oid] == b"tiny"
    core.receive_data(
        dp.HEAD_LINK, dp.encode_event(dp.Task(oid + 1, TASK, b""), from_head=True), 4
    )
    core.decisions()
    core.task_done(oid + 1, [b"tiny"], 5, 6)  # unmarked: inline as before
    (write,) = core.decisions()
    assert isinstance(write, dp.Write)
    assert dp.encode_event(dp.Result(oid + 1, b"tiny")) in b"".join(
        bytes(b) for b in write.buffers
    )


def test_an_actor_call_of_a_driver_at_its_cap_is_marked_too() -> None:
    net = Net(inline_cap_bytes=10)
    w = net.worker()
    d = net.driver()
    actor = d.oid(1)
    d.send(dp.ActorCreate(actor, TASK, b"init", 0))
    assert w.take() == [
        dp.ActorBuild(actor, 1, net.head.epoch),
        dp.ActorCreate(actor, TASK, b"init"),
    ]
    w.send(dp.Result(actor, b""))
    d.take()
    d.send(dp.ActorCall(d.oid(2), TASK, actor, b"m"))
    assert w.take() == [dp.ActorCall(d.oid(2), TASK, actor, b"m")]
    w.send(dp.Result(d.oid(2), bytes(10)))
    assert d.take() == [dp.Result(d.oid(2), bytes(10))]
    d.send(dp.ActorCall(d.oid(3), TASK, actor, b"m"))
    assert w.take() == [
        dp.Free(d.oid(3), dp.FREE_STORE),
        dp.ActorCall(d.oid(3), TASK, actor, b"m"),
    ]
