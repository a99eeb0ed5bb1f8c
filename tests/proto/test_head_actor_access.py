"""Who may call and kill an actor (`dista_proto._head_actor_access`): its creator, and the
drivers that showed the capability its creator sent in actor-open; an actor whose creator
sent none (a peer that knows only the page), its creator only. Opens across a resume."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F
from dista_proto._head_actor_stores import FORGET_ASK

from .support.security_peers import REGISTRY, Net, Raw

TYPE = 0xAC7
METHOD = 0x3E
CAP = bytes(range(16))
WRONG = bytes(16)
GRACE = 1_000


def refused(actor: int) -> str:
    return (
        f"actor {actor:#x} was not opened by this driver: only its creator and holders of a "
        "handle it gave out may call or kill it"
    )


def _actor(net: Net, owner: Raw, worker: Raw, capability: bytes | None = CAP) -> int:
    actor = owner.oid(1)
    owner.send(dp.ActorCreate(actor, TYPE, b"init", 0))
    if capability is not None:
        owner.send(dp.ActorOpen(actor, capability))
    assert dp.ActorCreate(actor, TYPE, b"init") in worker.take()
    worker.send(dp.Result(actor, b""))
    assert owner.take() == [dp.Result(actor, b"")]
    return actor


def _call(d: Raw, actor: int, n: int) -> dp.ActorCall:
    call = dp.ActorCall(d.oid(n), METHOD, actor, b"arg")
    d.send(call)
    return call


def test_the_creator_and_openers_may_call_and_kill_others_may_not() -> None:
    net = Net()
    worker = net.worker()
    owner, friend, stranger = net.driver(), net.driver(), net.driver()
    actor = _actor(net, owner, worker)
    # The creator calls.
    assert worker.take() == [] and _call(owner, actor, 2) in worker.take()
    # A driver that showed the capability calls.
    friend.send(dp.ActorOpen(actor, CAP))
    assert _call(friend, actor, 1) in worker.take()
    # One that did not: its call fails on its own ID, saying who may; nothing reaches the
    # worker, and its kill is refused with the same words.
    _call(stranger, actor, 1)
    assert worker.take() == []
    assert stranger.take() == [dp.Error(stranger.oid(1), refused(actor))]
    stranger.send(dp.ActorKill(actor), dp.ActorKill(actor, dp.KILL_FORCE))
    assert stranger.take() == [dp.Error(actor, refused(actor))] * 2
    assert worker.take() == [] and worker.closed is None
    # A wrong capability is refused, changes nothing, and opens nothing.
    stranger.send(dp.ActorOpen(actor, WRONG))
    (error,) = stranger.take()
    assert error.object_id == actor and "is not the actor's" in error.message  # type: ignore[union-attr]
    _call(stranger, actor, 2)
    assert stranger.take() == [dp.Error(stranger.oid(2), refused(actor))]
    # The creator's second open (another capability) does not replace the first.
    owner.send(dp.ActorOpen(actor, WRONG))
    assert _call(friend, actor, 2) in worker.take()
    # The opener may kill it.
    friend.send(dp.ActorKill(actor))
    assert worker.take() == [dp.ActorKill(actor), dp.Checkpoint(actor, FORGET_ASK)]
    # Its drivers hear it ended once the worker (a store's) answers the ask behind the kill
    # (the call still running fails at once).
    assert [e.object_id for e in owner.take()] == [owner.oid(2)]  # type: ignore[union-attr]
    worker.send(dp.Checkpointed(actor, FORGET_ASK, f"actor {actor:#x} is not on this worker"))
    assert dp.Error(actor, f"actor {actor:#x} was killed by driver {friend.number}") in (
        owner.take()
    )


def test_an_actor_whose_creator_sent_no_open_is_its_creators_alone() -> None:
    net = Net(recovery_grace_ns=GRACE)
    worker = net.worker()
    owner, other = net.driver(), net.driver()
    actor = _actor(net, owner, worker, capability=None)  # a page-only driver
    _call(other, actor, 1)
    assert other.take() == [dp.Error(other.oid(1), refused(actor))]
    # A capability shown for it cannot be checked: the call waits (for the creator's open,
    # which never comes), then fails saying so; nothing reached the worker.
    other.send(dp.ActorOpen(actor, CAP))
    _call(other, actor, 2)
    assert other.take() == [] and worker.take() == []
    net.head.on_timer(2 * GRACE)
    net.pump()
    got = other.take()
    assert dp.Error(other.oid(2), refused(actor)) in got
    assert worker.take() == []
    # The creator still calls and kills it.
    assert _call(owner, actor, 2) in worker.take()
    owner.send(dp.ActorKill(actor))
    assert dp.ActorKill(actor) in worker.take()


def test_an_open_overtaking_the_creators_is_decided_by_it() -> None:
    net = Net()
    worker = net.worker()
    owner, friend, stranger = net.driver(), net.driver(), net.driver()
    actor = _actor(net, owner, worker, capability=None)
    friend.send(dp.ActorOpen(actor, CAP))
    stranger.send(dp.ActorOpen(actor, WRONG))
    friend_call = _call(friend, actor, 1)
    _call(stranger, actor, 1)
    assert worker.take() == []
    owner.send(dp.ActorOpen(actor, CAP))  # the creator's, late: it decides both
    assert worker.take() == [friend_call]
    got = stranger.take()
    assert dp.Error(stranger.oid(1), refused(actor)) in got
    assert any(isinstance(e, dp.Error) and "is not the actor's" in e.message for e in got)


def _resume(net: Net, number: int) -> Raw:
    d = net.connect()
    d.send(dp.Hello(F.ROLE_DRIVER, REGISTRY, resume=dp.Resume(number, 0x99)))
    (welcome,) = d.take()
    assert welcome == dp.Welcome(number, net.head.epoch)
    d.number = number
    return d


def test_opens_are_sent_again_after_a_head_restart_before_the_creator_resumes() -> None:
    # A new head: the opener resumes first; its open and call wait for the creator's
    # actor-create and actor-open, which decide them. (The actor's worker rejoins saying
    # it hosts it, so that the new head places it back there at once.)
    for shown, taken in ((CAP, True), (WRONG, False)):
        net = Net(recovery_grace_ns=10 * GRACE)
        worker = net.connect()
        marks = dp.HELLO_CHECKPOINTS | dp.HELLO_HOSTS_ACTOR
        worker.send(dp.Hello(F.ROLE_WORKER, REGISTRY, dp.Address("10.0.0.1", 7000), mark=marks))
        friend = _resume(net, 5)
        actor = 9 << dp.ID_BITS | 1
        friend.send(dp.ActorOpen(actor, shown))
        call = _call(friend, actor, 3)
        owner = _resume(net, 9)
        owner.send(dp.ActorCreate(actor, TYPE, b"init", 0))
        assert worker.take() == []  # it waits for the worker that hosts it
        worker.send(dp.Error(actor, "still hosts it", dp.hosts_mark(0)))
        build, restore = worker.take()  # (numbered: the worker has a store)
        assert isinstance(build, dp.ActorBuild) and isinstance(restore, dp.ActorRestore)
        assert friend.take() == []  # still waiting: the creator's capability decides
        owner.send(dp.ActorOpen(actor, CAP))
        worker.send(dp.Error(actor, "none", dp.ERROR_NO_CHECKPOINT))
        sent = worker.take()
        assert (call in sent) is taken
        if not taken:
            assert dp.Error(friend.oid(3), refused(actor)) in friend.take()
        friend.send(dp.Resumed())
        owner.send(dp.Resumed())
        (record,) = net.head.actors()
        assert (5 in record.opened) is taken


def test_opens_for_unknown_actors_are_kept_only_while_their_creator_may_come() -> None:
    net = Net(recovery_grace_ns=GRACE)
    owner, other = net.driver(), net.driver()
    access = net.head._actors.access
    # Its creator is here and resumed: no such actor, and nothing is kept for it.
    other.send(dp.ActorOpen(owner.oid(9), CAP))
    assert access.early == 0
    # A creator not connected (a head restart: it may still resume) holds them for the
    # recovery grace, then they go, so a peer naming made-up actors keeps nothing.
    absent = (other.number + 1) % (1 << 24) or 1
    for i in range(1, 101):
        other.send(dp.ActorOpen((absent << dp.ID_BITS) | i, CAP))
    assert access.early == 100
    net.head.on_timer(GRACE + 10)
    net.pump()
    assert access.early == 0
    assert other.closed is None
