"""Rules for a killed actor's checkpoints: their removal is sure before the drivers hear
the actor ended. The actor-kill that removes them is followed by a checkpoint ask the
worker answers at once; until that answer, a worker lost first has the removal sent
again to another worker with a store, and a head lost first leaves the driver that killed
the actor with its kill unconfirmed, so that it sends create and kill again to the new
head (which removes them)."""

from __future__ import annotations

from .support.actors import SimActors
from .support.cluster import deliver_all
from .support.recovery import RecoverySim
from .test_recovery_rules import _call, _host, _reconnect_all, _sim, _start_actor


def _to_head(sim: RecoverySim) -> None:
    """Deliver what is on its way to the head, and nothing else."""
    while busy := [p for p in sim.pipes if p.target is sim.head and p.chunks]:
        sim.deliver(busy[0])


def _checkpointed_actor(sim: RecoverySim, actors: SimActors) -> int:
    owner = sim.drivers[0]
    actor = _start_actor(sim, owner, every=1)
    _call(sim, owner, actor, 5)
    sim.settle()
    assert actors.disk.get(actor)  # a checkpoint covers the call
    return actor


def test_a_kill_whose_removal_a_head_restart_lost_is_sent_again_by_its_driver() -> None:
    sim = _sim(seed=31, workers=2)
    actors = SimActors(sim)
    owner = sim.drivers[0]
    actor = _checkpointed_actor(sim, actors)
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    _to_head(sim)  # the head ends the actor: actor-kill and the ask go to its host ...
    assert [p for p in sim.pipes if p.target is _host(sim, actor).core and p.chunks]
    while busy := [p for p in sim.pipes if p.target is owner.core and p.chunks]:
        sim.deliver(busy[0])  # (whatever the head told the owner meanwhile arrives)
    assert actor not in owner.failed  # not told it ended: its kill is kept
    sim.restart_head()  # ... and are lost with the head before they arrive
    deliver_all(sim)
    _reconnect_all(sim)
    sim.settle()
    assert actor not in actors.disk
    assert "was killed by" in owner.failed[actor]


def test_a_removal_lost_with_its_workers_link_goes_to_another_worker_with_a_store() -> None:
    sim = _sim(seed=32, workers=2)
    actors = SimActors(sim)
    owner = sim.drivers[0]
    actor = _checkpointed_actor(sim, actors)
    host = _host(sim, actor)
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    _to_head(sim)  # actor-kill and the ask are on their way to the host ...
    assert sim.cut(host.core, reset=True)  # ... and lost with its link
    sim.settle()
    assert actor not in actors.disk  # the other worker removed them
    assert "was killed by" in owner.failed[actor]
