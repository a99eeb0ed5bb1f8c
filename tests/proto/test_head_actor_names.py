"""Named actors at the head (`dista_proto._head_actor_names`): a name reserved before the
create, a taken one refuses the create, lookups answered with the actor's ID, type and
capability (an opening), holders keeping the actor past its creator, and a restarted head
whose lookups wait for the creator's resume."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import REGISTRY, Net, Raw

TYPE = 0xAC7
CAP = bytes(range(16))
GRACE = 1_000


def _named(owner: Raw, worker: Raw, name: str, n: int = 1) -> int:
    actor, request = owner.oid(n), owner.oid(n + 1)
    owner.send(dp.ActorName(actor, request, name), dp.ActorCreate(actor, TYPE, b"init", 0))
    owner.send(dp.ActorOpen(actor, CAP))
    assert owner.take() == [dp.Result(request, b"")]
    assert dp.ActorCreate(actor, TYPE, b"init") in worker.take()
    worker.send(dp.Result(actor, b""))
    assert owner.take() == [dp.Result(actor, b"")]
    return actor


def _answer(actor: int) -> bytes:
    return actor.to_bytes(8, "little") + TYPE.to_bytes(8, "little") + CAP


def test_a_name_is_looked_up_a_taken_one_refuses_the_create_an_unknown_one_errs() -> None:
    net = Net()
    worker = net.worker()
    owner, other = net.driver(), net.driver()
    actor = _named(owner, worker, "ledger")
    other.send(dp.ActorLookup(other.oid(1), "ledger"))
    assert other.take() == [dp.Result(other.oid(1), _answer(actor))]
    call = dp.ActorCall(other.oid(2), 7, actor, b"x")  # a lookup is an opening
    other.send(call)
    assert call in worker.take()
    # Taken: the request fails saying so, and the create after it builds nothing.
    dup = other.oid(3)
    other.send(dp.ActorName(dup, other.oid(4), "ledger"), dp.ActorCreate(dup, TYPE, b"", 0))
    why = f"the actor name 'ledger' is taken by actor {actor:#x}: choose another, or look "
    why += "it up with get_actor"
    assert other.take() == [dp.Error(other.oid(4), why), dp.Error(dup, why)]
    assert worker.take() == []
    other.send(dp.ActorLookup(other.oid(5), "nobody"))
    (error,) = other.take()
    assert error == dp.Error(other.oid(5), error.message) and "'nobody'" in error.message  # type: ignore[union-attr]


def test_the_actor_lives_while_any_holder_does_and_its_name_is_freed_after() -> None:
    net = Net()
    worker = net.worker()
    owner, other = net.driver(), net.driver()
    actor = _named(owner, worker, "ledger")
    other.send(dp.ActorLookup(other.oid(1), "ledger"))
    other.take()
    # The creator drops its last handle, then leaves: the other holder keeps the actor.
    owner.send(dp.ActorKill(actor, dp.KILL_AFTER_CALLS))
    net.head.connection_lost(owner.link, 0, "the driver left")  # gone for good
    net.pump()
    assert worker.take() == []
    call = dp.ActorCall(other.oid(2), 7, actor, b"x")
    other.send(call)
    assert call in worker.take()
    # The last holder lets go: it ends, and the name is free for a new actor.
    other.send(dp.ActorKill(actor, dp.KILL_AFTER_CALLS))
    worker.send(dp.Result(other.oid(2), b"r"))
    assert dp.ActorKill(actor) in worker.take()
    third = net.driver()
    _named(third, worker, "ledger")


def test_a_restarted_heads_lookup_waits_for_the_creators_resume() -> None:
    net = Net(recovery_grace_ns=10 * GRACE)
    worker = net.worker()
    holder = net.connect()
    holder.send(dp.Hello(F.ROLE_DRIVER, REGISTRY, resume=dp.Resume(5, 0x99)))
    holder.take()
    holder.number = 5
    holder.send(dp.ActorLookup(holder.oid(9), "ledger"))
    assert holder.take() == []  # its creator may resume yet
    owner = net.connect()
    owner.send(dp.Hello(F.ROLE_DRIVER, REGISTRY, resume=dp.Resume(9, 0x99)))
    owner.take()
    owner.number = 9
    actor = owner.oid(1)
    owner.send(dp.ActorCreate(actor, TYPE, b"init", 0), dp.ActorOpen(actor, CAP))
    owner.send(dp.ActorName(actor, 0, "ledger"), dp.Resumed())
    assert holder.take() == [dp.Result(holder.oid(9), _answer(actor))]
    assert owner.take() == []  # request 0: no answer
    # A name nobody claims: the wait ends with the grace.
    holder.send(dp.ActorLookup(holder.oid(10), "nobody"))
    net.head.on_timer(20 * GRACE)
    net.pump()
    (error,) = holder.take()
    assert error.object_id == holder.oid(10)  # type: ignore[union-attr]
    del worker
