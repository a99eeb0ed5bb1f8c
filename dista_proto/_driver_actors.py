"""A driver's actor calls kept for a new head, and the checkpoint asks that let them go.

Theory of operation
-------------------
The page: after a head restart a driver sends "each live actor's actor-create again, in
order with everything else, then every call it still keeps". A call is kept from when it is
made until a checkpoint covers it (the head's covered frame names the newest call a written
checkpoint includes): a new head restores the actor from that checkpoint and runs only the
calls the driver sends again. A covered call whose answer has not come (a head gave it
again after a reconnect, or its holder is away) is sent again until it comes: the
checkpoint carries the answers of the calls it covers. `Driver` holds one `KeptCalls`
beside its `Ledger` and routes to it the calls it makes, the checkpoints it asks for, and
the head's answers about actors.

Keeping has a budget (``keep_bytes``, DISTA_ACTOR_KEEP_BYTES). Past it, the driver asks for
a checkpoint of the actor whose call crossed it (an ask of its own, answered quietly).
Past twice the budget it drops at once the calls that checkpoint will cover, and says so
only if the checkpoint fails; while that actor's checkpoints fail, or if calls still come
faster than checkpoints are written, its oldest calls go, down to the budget, and an
`ActorWarning` says once that the actor can no longer be rebuilt exactly.

An actor that is gone (killed here, or the head said so) keeps no calls: no checkpoint will
cover them, and the head fails them. Those not answered yet are still sent again on a
resume until the head has answered them (else they would count as lost).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ._conventions import ERROR_WARNING, awaited_ms, failed_at, kept_size
from ._decisions import ActorAwaitsHost, ActorWarning, Decision
from ._events import ActorCall

__all__ = ["KeptCalls"]


class KeptCalls:
    """A driver's actor calls not covered by a checkpoint, and its checkpoint asks."""

    __slots__ = (
        "_announced",
        "_asked",
        "_asked_at",
        "_asks",
        "_early",
        "_failing",
        "_gone",
        "_kept",
        "_lossy",
        "_told",
        "_unanswered",
        "_warn",
        "keep_bytes",
        "kept_bytes",
        "positions",
    )

    def __init__(self, keep_bytes: int, warn: Callable[[Decision], None]) -> None:
        #: The budget: bytes of kept calls (`kept_size`) past which a checkpoint is asked.
        self.keep_bytes = keep_bytes
        self.kept_bytes = 0
        self._warn = warn  # queues an `ActorWarning` (or `ActorAwaitsHost`) for the runtime
        #: Per live actor this driver knows, its calls not yet covered by a checkpoint.
        self._kept: dict[int, deque[ActorCall]] = {}
        self._asks: dict[int, int] = {}  # every checkpoint ask not answered -> its actor
        self._asked: dict[int, int] = {}  # of those, our own (for the budget) -> its actor
        self._asked_at: dict[int, int] = {}  # actor -> the newest call our own ask follows
        self._failing: dict[int, str] = {}  # actor -> why our last own ask failed
        #: Actors whose calls we dropped before our own ask was answered: if it fails,
        #: those calls are in no checkpoint.
        self._early: set[int] = set()
        self._lossy: set[int] = set()  # actors whose kept calls were cut (warned once)
        #: Actors this driver killed or heard are gone: calls to them are not kept (the
        #: head fails them, and no checkpoint will ever cover them).
        self._gone: set[int] = set()
        self._told: set[int] = set()  # of those, the ones the head said are gone
        #: Calls not kept whose answers have not come: to those actors, and calls a
        #: checkpoint covers. A resume sends them again until answered: a new head answers
        #: a covered one from the answers its checkpoint carries (else it would be lost).
        self._unanswered: dict[int, ActorCall] = {}
        self._announced: set[int] = set()  # our actors whose creation we heard of
        #: Kept calls whose answers said where they ran in their actor's order: a resume
        #: tells a new head (actor-order), which replays them in that order.
        self.positions: dict[int, int] = {}

    def kept(self, actor: int) -> int:
        """How many calls to ``actor`` are kept (not yet covered)."""
        kept = self._kept.get(actor)
        return len(kept) if kept is not None else 0

    @property
    def own_asks(self) -> int:
        """Checkpoints asked for the budget's sake whose answer has not come."""
        return len(self._asked)

    # -- as the driver goes --------------------------------------------------------------

    def created(self, actor: int) -> None:
        """The driver made ``actor``: its calls are kept from now on."""
        self._kept[actor] = deque()

    def keep(self, call: ActorCall) -> bool:
        """Keep ``call`` (unless its actor is gone); True if the kept calls are now over
        the budget (`asking`, `asked` and `trim` follow)."""
        actor = call.actor_id
        if actor in self._gone:
            # Not kept (no checkpoint will cover it): the head answers that the actor is
            # gone; sent again on a resume until it has (else it would count as lost).
            self._unanswered[call.object_id] = call
            return False
        kept = self._kept.get(actor)
        if kept is None:  # an actor another driver made, seen here first
            kept = self._kept[actor] = deque()
        kept.append(call)
        self.kept_bytes += kept_size(call.argument)
        return self.kept_bytes > self.keep_bytes

    def asking(self, actor: int) -> bool:
        """Whether an ask of our own for ``actor``'s checkpoint waits for its answer."""
        return actor in self._asked_at

    def asked(self, oid: int, actor: int, *, own: bool = False) -> None:
        """A checkpoint of ``actor`` was asked for under ID ``oid``; ``own``: by the driver
        for the budget (it covers the calls kept so far), not by the user."""
        self._asks[oid] = actor
        if own:
            self._asked[oid] = actor
            kept = self._kept[actor]
            self._asked_at[actor] = kept[-1].object_id if kept else 0

    def trim(self, actor: int) -> None:
        """Over the budget, with our own ask for ``actor`` out: past twice the budget, drop
        its calls that checkpoint covers, or cut its oldest if its checkpoints fail."""
        if self.kept_bytes <= 2 * self.keep_bytes:
            return
        failure = self._failing.get(actor)
        if failure is None:
            # The checkpoint asked for covers the calls before it: drop those now, quietly,
            # and say so only if it fails after all.
            asked = self._asked_at[actor]
            kept = self._kept[actor]
            while kept and kept[0].object_id <= asked:
                self._let_go(kept)
                self._early.add(actor)
            if self.kept_bytes > 2 * self.keep_bytes:
                self._cut(actor, "calls come faster than checkpoints are written")
        else:
            self._cut(actor, failure)

    def ended(self, actor: int, pending: Callable[[int], bool]) -> None:
        """``actor`` is gone (killed, or the head said so): its calls are not kept; those
        ``pending`` (not answered yet) are sent again on a resume until the head has
        answered them."""
        kept = self._kept.pop(actor, None)
        if kept:
            self.kept_bytes -= sum(kept_size(c.argument) for c in kept)
            for call in kept:
                self.positions.pop(call.object_id, None)
                if pending(call.object_id):
                    self._unanswered[call.object_id] = call
        self._lossy.discard(actor)
        self._failing.pop(actor, None)
        self._early.discard(actor)
        self._announced.discard(actor)
        self._gone.add(actor)

    def resend(self, pending: Callable[[int], bool]) -> tuple[list[ActorCall], dict[int, int]]:
        """For a resume: the calls to send again, in the order they were made (those kept,
        and those not kept still ``pending``), and every checkpoint ask not answered."""
        gone = {oid: c for oid, c in self._unanswered.items() if pending(oid)}
        self._unanswered = gone
        calls = sorted(
            [*(c for calls in self._kept.values() for c in calls), *gone.values()],
            key=_call_order,
        )
        return calls, dict(self._asks)

    # -- the head's answers --------------------------------------------------------------

    def covered(self, actor: int, newest: int, pending: Callable[[int], bool]) -> None:
        """A checkpoint of ``actor`` includes its calls up to ``newest``: let them go;
        those still ``pending`` (their answers not come: on their way, or to be given
        again) are sent again on a resume until answered."""
        self._failing.pop(actor, None)  # a checkpoint was written after all
        kept = self._kept.get(actor)
        while kept and kept[0].object_id <= newest:
            call = self._let_go(kept)
            if pending(call.object_id):
                self._unanswered[call.object_id] = call

    def _let_go(self, kept: deque[ActorCall]) -> ActorCall:
        """The oldest of ``kept`` is kept no more."""
        call = kept.popleft()
        self.kept_bytes -= kept_size(call.argument)
        if self.positions:
            self.positions.pop(call.object_id, None)
        return call

    def answered(self, oid: int, position: int = 0) -> None:
        """``oid`` was answered (``position``: where, an actor call, it ran): a call to a
        call not kept is not sent again."""
        if self._unanswered and self._unanswered.pop(oid, None) is not None:
            return  # not kept: where it ran is not needed
        if position:
            self.positions[oid] = position

    def result(self, oid: int, position: int = 0) -> bool | None:
        """A result frame for ``oid``: None if it is no checkpoint ask's nor actor's (a
        task's or a call's: the ledger's), else whether the runtime hears it."""
        if self._unanswered and self._unanswered.pop(oid, None) is not None:
            position = 0  # not kept: where it ran is not needed
        if position:
            self.positions[oid] = position  # an actor call's: where it ran
        if oid in self._asks:
            del self._asks[oid]
            if oid in self._asked:
                self._own_answered(oid, None)
                return False
            return True
        if oid in self._kept:
            if oid in self._announced:
                return False  # created: a new head restoring it says so again
            self._announced.add(oid)
            return True
        return None

    def error(
        self, oid: int, message: str, mark: int, pending: Callable[[int], bool]
    ) -> bool | None:
        """An error frame for ``oid``: None if it is no checkpoint ask's nor actor's (a
        task's or a call's: the ledger's), else whether the runtime hears it. A warning
        about an actor is queued here; an error for a live actor says it is gone."""
        unkept = bool(self._unanswered) and self._unanswered.pop(oid, None) is not None
        position = failed_at(mark)
        if position is not None:
            if not unkept:
                self.positions[oid] = position  # an actor call that failed: where it ran
            return None
        if oid in self._asks:
            del self._asks[oid]
            if oid in self._asked:
                self._own_answered(oid, message)
                return False
            return True
        if mark == ERROR_WARNING:
            self._warn(ActorWarning(oid, message))
            return False
        waits = awaited_ms(mark)
        if waits is not None:
            self._warn(ActorAwaitsHost(oid, waits, message))  # (a notice, not a failure)
            return False
        if oid in self._kept:
            self.ended(oid, pending)  # the actor is gone: nothing left to resend
            self._told.add(oid)
            return True
        if oid in self._told:
            return False  # told again that the actor is gone (a head that never knew it)
        if oid in self._gone:
            self._told.add(oid)  # one we killed: the head says how it ended, once
            return True
        return None

    def _own_answered(self, oid: int, failure: str | None) -> None:
        actor = self._asked.pop(oid)
        self._asked_at.pop(actor, None)
        if failure is None:
            self._failing.pop(actor, None)
            self._early.discard(actor)
            return
        if self._failing.get(actor) != failure:
            self._warn(ActorWarning(actor, f"a checkpoint failed: {failure}"))
        self._failing[actor] = failure
        if actor in self._early:
            self._early.discard(actor)
            self._lost_exactness(actor, failure)  # calls dropped for it are in no checkpoint
        if self.kept_bytes > self.keep_bytes:
            self._cut(actor, failure)

    # -- losing exactness ----------------------------------------------------------------

    def _cut(self, actor: int, failure: str) -> None:
        """Drop the actor's oldest kept calls down to the budget (its checkpoints fail, so
        none will cover them): it can no longer be rebuilt exactly."""
        kept = self._kept.get(actor)
        if not kept:
            return
        while kept and self.kept_bytes > self.keep_bytes:
            self._let_go(kept)
        self._lost_exactness(actor, failure)

    def _lost_exactness(self, actor: int, failure: str) -> None:
        if actor not in self._lossy:
            self._lossy.add(actor)
            why = (
                f"actor {actor:#x}: its calls not covered by a checkpoint passed "
                f"{self.keep_bytes} bytes (DISTA_ACTOR_KEEP_BYTES) and no checkpoint covers "
                f"them ({failure}), so the oldest were dropped: after a head restart it "
                "cannot be rebuilt exactly"
            )
            self._warn(ActorWarning(actor, why))


def _call_order(call: ActorCall) -> int:
    return call.object_id
