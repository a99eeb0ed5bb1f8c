"""A worker keeps its actor alive through a head loss and says so when it rejoins
(`HELLO_HOSTS_ACTOR`, then an error frame marked `ERROR_HOSTS_ACTOR` carrying the calls it
has seen, `hosts_mark`); a head that knows only the page, which has every rejoining worker
destroy its actor, may build another actor there: the live copy goes then."""

from __future__ import annotations

import dista_proto as dp

ACTOR = 5 << dp.ID_BITS | 1
OTHER = 5 << dp.ID_BITS | 2


#: The head's end of each worker's current connection (a rejoin opens a new one).
_HEADS: dict[int, dp.Connection] = {}


def _start(core: dp.Worker) -> None:
    _HEADS[id(core)] = dp.Connection(dp.Role.HEAD)
    core.start(0)


def _frames(core: dp.Worker) -> tuple[list[dp.Event], list[dp.Decision]]:
    """What ``core`` sent the head, and its other decisions."""
    head = _HEADS[id(core)]
    sent, other = [], []
    for d in core.decisions():
        if isinstance(d, dp.Write) and d.link == dp.HEAD_LINK:
            head.receive_data(b"".join(bytes(b) for b in d.buffers))
            sent.extend(head.next_events())
        else:
            other.append(d)
    return sent, other


def _give(core: dp.Worker, *events: dp.Event) -> None:
    data = b"".join(dp.encode_event(e, from_head=True) for e in events)
    core.receive_data(dp.HEAD_LINK, data, 0)


def _hosting(calls: int) -> dp.Worker:
    """A worker hosting ``ACTOR``, which has been sent ``calls`` calls."""
    core = dp.Worker(registry_hash=9, address=dp.Address("127.0.0.1", 1), checkpoints=True)
    _start(core)
    _frames(core)
    _give(core, dp.ActorCreate(ACTOR, 7, b"init"))
    core.actors.actor_started(ACTOR, None)  # built
    for i in range(calls):
        _give(core, dp.ActorCall(ACTOR + 10 + i, 3, ACTOR, b"x"))
    _frames(core)
    return core


def test_the_actor_lives_on_through_a_head_loss_and_is_reported_on_the_rejoin() -> None:
    core = _hosting(calls=3)
    core.connection_lost(dp.HEAD_LINK, 0)
    _, decisions = _frames(core)
    assert not any(isinstance(d, dp.StopActor) for d in decisions)  # not destroyed
    assert core.actor == ACTOR
    _start(core)  # the rejoin
    sent, _ = _frames(core)
    hello = sent[0]
    assert isinstance(hello, dp.Hello) and hello.mark & dp.HELLO_HOSTS_ACTOR
    report = sent[-1]
    assert isinstance(report, dp.Error) and report.object_id == ACTOR
    assert dp.hosted_calls(report.mark) == 3  # the calls it has seen, queued ones too


def test_a_worker_not_hosting_says_nothing_of_actors_when_it_rejoins() -> None:
    core = dp.Worker(registry_hash=9, address=dp.Address("127.0.0.1", 1))
    _start(core)
    core.connection_lost(dp.HEAD_LINK, 0)
    _start(core)
    sent, _ = _frames(core)
    assert not sent[0].mark & dp.HELLO_HOSTS_ACTOR  # type: ignore[attr-defined]
    assert not any(isinstance(e, dp.Error) for e in sent)


def test_a_head_that_knows_only_the_page_may_build_another_actor_there() -> None:
    core = _hosting(calls=1)
    core.connection_lost(dp.HEAD_LINK, 0)
    _start(core)
    _frames(core)
    _give(core, dp.ActorCreate(OTHER, 7, b"init"))
    sent, decisions = _frames(core)
    assert dp.StopActor(ACTOR, False) in decisions  # the live copy goes, checkpoints stay
    assert any(isinstance(d, dp.StartActor) and d.actor_id == OTHER for d in decisions)
    assert not any(isinstance(e, dp.Error) for e in sent) and core.actor == OTHER


def test_placed_back_its_answer_says_the_calls_it_has_seen_or_that_it_is_stale() -> None:
    core = _hosting(calls=2)
    core.connection_lost(dp.HEAD_LINK, 0)
    _start(core)
    _frames(core)
    _give(core, dp.ActorRestore(ACTOR, 7, dp.RESTORE_NEWEST))
    _, decisions = _frames(core)
    assert any(isinstance(d, dp.StartActor) and d.covers == dp.RESTORE_NEWEST for d in decisions)
    core.actors.actor_started(ACTOR, None, covers=2)
    (answer,), _ = _frames(core)
    assert answer == dp.Result(ACTOR, (2).to_bytes(8, "little"))
    core.actors.actor_started(ACTOR, "stale", fenced=True)
    (refusal,), _ = _frames(core)
    assert isinstance(refusal, dp.Error) and refusal.mark == dp.ERROR_FENCED
    assert core.actor == ACTOR  # (the head's kill takes it)


def test_an_actor_build_numbers_the_start_that_follows_it() -> None:
    core = dp.Worker(registry_hash=9, address=dp.Address("127.0.0.1", 1), checkpoints=True)
    _start(core)
    _frames(core)
    # Numbered: the store orders this build by its head's number (fencing).
    _give(core, dp.ActorBuild(ACTOR, 7, 0xE), dp.ActorRestore(ACTOR, 3, 12))
    _, decisions = _frames(core)
    (start,) = [d for d in decisions if isinstance(d, dp.StartActor)]
    assert (start.covers, start.build, start.epoch) == (12, 7, 0xE)
    core.actors.actor_started(ACTOR, None)
    _give(core, dp.ActorKill(ACTOR, dp.KILL_KEEP))
    # A number for another actor's build does not number this one's; none: 0.
    _give(core, dp.ActorBuild(OTHER, 8, 0xE), dp.ActorCreate(ACTOR, 3, b"init"))
    _, decisions = _frames(core)
    (start,) = [d for d in decisions if isinstance(d, dp.StartActor)]
    assert (start.build, start.epoch) == (0, 0)


def test_a_restore_answer_tells_the_calls_its_state_has_and_those_take_no_place() -> None:
    core = dp.Worker(registry_hash=9, address=dp.Address("127.0.0.1", 1), checkpoints=True)
    _start(core)
    _frames(core)
    _give(core, dp.ActorRestore(ACTOR, 7, dp.RESTORE_NEWEST))
    _frames(core)
    caller_a, caller_b = 5 << dp.ID_BITS, 6 << dp.ID_BITS
    newest = {5: caller_a | 4, 6: caller_b | 9}
    core.actors.actor_started(ACTOR, None, covers=13, newest=newest)
    (answer,), _ = _frames(core)
    # The count, then each caller's newest call the checkpoint has (8 bytes each).
    expected = (13).to_bytes(8, "little")
    expected += (caller_a | 4).to_bytes(8, "little") + (caller_b | 9).to_bytes(8, "little")
    assert answer == dp.Result(ACTOR, expected)
    # Resent calls the state has are answered but not counted: the head numbers none.
    _give(
        core,
        dp.ActorCall(caller_a | 3, 3, ACTOR, b"x"),
        dp.ActorCall(caller_b | 9, 3, ACTOR, b"x"),
    )
    assert core.actors.calls == 13
    _give(core, dp.ActorCall(caller_a | 5, 3, ACTOR, b"x"))
    assert core.actors.calls == 14
    # With no checkpoint written (the ninth byte), the head still hears which they are.
    core.actors.actor_started(ACTOR, None, covers=14, uncovered=True, newest={5: caller_a | 5})
    (answer,), _ = _frames(core)
    assert bytes(answer.value) == (14).to_bytes(8, "little") + b"\x01" + (caller_a | 5).to_bytes(
        8, "little"
    )
