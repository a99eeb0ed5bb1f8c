"""Who may call and kill an actor: its creator, and those who showed its capability.

Theory of operation
-------------------
An actor's ID is guessable (its driver's number, then a count), so naming it proves
nothing. Its creating driver draws a capability (`ACTOR_CAPABILITY_SIZE` random bytes; the
core takes it as an argument) and sends it in Dista's actor-open frame right after its
actor-create; the head records it on the actor's record (the creator's first one counts).
Every handle carries the capability, so a handle passed into a task or pickled out of band
lets its holder send actor-open too: a matching one adds the holder's driver number to the
actor's ``opened`` set, a wrong one gets an error frame naming the actor and changes nothing.

A call, kill or checkpoint ask is taken (`MAY`) from the creator (the actor's ID carries its
number) or a number that opened the actor; refused (`NO`) from anyone else, with an error
frame saying who may; and held (`WAIT`) when the peer showed a capability the head cannot
check yet, because the creator has not sent its own (after a head restart, a holder may
resume before the creator; or the holder's open overtook the creator's). A held call waits
with the calls parked for unknown actors (`Resume`), until the creator's open decides it or
the recovery grace ends. An actor whose creator never sends actor-open (a peer that knows
only the page) may be called and killed by its creator only.

Numbers, not links, are remembered: a driver resuming on a new connection keeps what it
opened; after a head restart the new head knows nothing, and each driver sends its opens
again (its ledger), before its kept calls.
"""

from __future__ import annotations

import hmac
from typing import Final

from ._conventions import ID_BITS
from ._events import ActorOpen, Error
from ._head_records import ActorRecord, Peer
from ._head_wire import Wire

__all__ = ["MAY", "NO", "WAIT", "ActorAccess", "not_opened"]

#: Verdicts on a call, kill or checkpoint ask.
MAY: Final = 0
NO: Final = 1
WAIT: Final = 2

#: Capabilities shown for actors this head does not know yet (after a restart, before the
#: creator resumes), at most: the oldest are forgotten first.
EARLY_CLAIMS_KEPT: Final = 65_536
#: Capabilities one actor keeps before its creator's arrives, at most.
CLAIMS_PER_ACTOR: Final = 4_096


def not_opened(actor_id: int) -> str:
    """Why a call, kill or checkpoint ask from a peer that did not open the actor fails."""
    return (
        f"actor {actor_id:#x} was not opened by this driver: only its creator and holders of "
        "a handle it gave out may call or kill it"
    )


class ActorAccess:
    """The capabilities of the head's actors, and who opened which."""

    def __init__(self, wire: Wire, records: dict[int, ActorRecord]) -> None:
        self._wire = wire
        self._records = records
        #: Actor ID -> driver number -> the capability it showed, for actors not known yet.
        self._early: dict[int, dict[int, bytes]] = {}
        self._early_count = 0

    @property
    def early(self) -> int:
        """How many capabilities are kept for actors not known yet."""
        return self._early_count

    def verdict(self, peer: Peer, actor: ActorRecord) -> int:
        """May ``peer`` call or kill ``actor`` (`MAY`), not (`NO`), or not known yet (`WAIT`)?"""
        number = peer.number
        if number == actor.actor_id >> ID_BITS or number in actor.opened:
            return MAY
        if actor.capability is None and number in actor.claims:
            return WAIT
        return NO

    def open(self, peer: Peer, event: ActorOpen) -> bool:
        """``peer`` shows an actor's capability; True if it is the creator's, recorded now
        (the calls held for it may be decided)."""
        actor_id = event.object_id
        number = peer.number
        actor = self._records.get(actor_id)
        creator = actor_id >> ID_BITS == number
        if actor is None:
            if not creator:
                self._keep_early(actor_id, number, event.capability)
            return False  # (the creator's own, for an actor it did not create: nothing)
        if creator:
            if actor.capability is not None:
                return False  # the first one counts
            actor.capability = event.capability
            claims, actor.claims = actor.claims, {}
            for other, shown in claims.items():
                self._check(actor, other, shown)
            return True
        if actor.capability is None:
            if len(actor.claims) < CLAIMS_PER_ACTOR or number in actor.claims:
                actor.claims[number] = event.capability
            return False
        self._check(actor, number, event.capability)
        return False

    def created(self, actor: ActorRecord) -> None:
        """``actor`` is new to this head: the capabilities shown for it before count now."""
        early = self._early.pop(actor.actor_id, None)
        if early:
            self._early_count -= len(early)
            actor.claims.update(early)

    def forget_early(self, actor_id: int) -> None:
        """No actor-create came for ``actor_id``: drop what was shown for it."""
        early = self._early.pop(actor_id, None)
        if early:
            self._early_count -= len(early)

    def refuse(self, peer: Peer, actor_id: int) -> None:
        """Tell ``peer`` it may not kill (or ask a checkpoint of) ``actor_id``."""
        self._wire.links.send(peer.link, Error(actor_id, not_opened(actor_id)))

    def _check(self, actor: ActorRecord, number: int, shown: bytes) -> None:
        assert actor.capability is not None
        if hmac.compare_digest(actor.capability, shown):
            actor.opened.add(number)
            return
        peer = self._wire.numbers.get(number)
        if peer is not None and peer.link in self._wire.peers:
            why = (
                f"actor {actor.actor_id:#x}: the capability this driver showed is not the "
                "actor's (a handle from another actor or cluster?): it may not call or kill it"
            )
            self._wire.links.send(peer.link, Error(actor.actor_id, why))

    def _keep_early(self, actor_id: int, number: int, capability: bytes) -> None:
        claims = self._early.get(actor_id)
        if claims is None:
            while self._early_count >= EARLY_CLAIMS_KEPT and self._early:
                oldest = next(iter(self._early))
                self._early_count -= len(self._early.pop(oldest))
            claims = self._early[actor_id] = {}
        elif len(claims) >= CLAIMS_PER_ACTOR and number not in claims:
            return
        if number not in claims:
            self._early_count += 1
        claims[number] = capability
