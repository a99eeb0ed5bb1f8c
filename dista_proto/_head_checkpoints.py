"""The head's side of actor checkpoints: asking for them, hearing they are written, what
they cover, and the budget of calls the head keeps meanwhile.

Every ``checkpoint_every`` calls, and when a driver asks, a checkpoint frame follows the
calls it covers; the head keeps every call the checkpoint it would restore from does not
cover. When checkpointed says one is written, it becomes the one the head restores from (a
worker removes only checkpoints older than the restore point a frame names, see `written`):
the head drops the calls it covers and tells each of their callers, with covered, the
newest of its own calls it includes.

The head's kept calls are bounded as drivers' are: past ``keep_bytes`` it asks for a
checkpoint; if checkpoints fail, it cuts the oldest and the actor can no longer be rebuilt
until a checkpoint covers them (`cut` says when one that waits to be rebuilt must end).
"""

from __future__ import annotations

from typing import Final

from ._conventions import ERROR_WARNING, ID_BITS, kept_size
from ._events import Checkpoint, Checkpointed, Covered, Error, Result
from ._head_records import ActorRecord, ActorState
from ._head_wire import Wire

__all__ = ["DEFAULT_ACTOR_KEEP_BYTES", "Checkpoints"]

#: The bytes of uncovered calls the head keeps per actor before it asks for a checkpoint.
DEFAULT_ACTOR_KEEP_BYTES: Final = 64 << 20

_WAITING: Final = ActorState.WAITING


class Checkpoints:
    """Checkpoint asks and answers for every actor, and the keep budget."""

    def __init__(self, wire: Wire, keep_bytes: int, answered_at: dict[int, int]) -> None:
        self._wire = wire
        self.keep_bytes = keep_bytes
        self._answered_at = answered_at  # `Actors.answered_at`: covered calls leave it

    def ask(self, actor: ActorRecord, ask: tuple[int, int] | None, calls: int = -1) -> None:
        """A checkpoint covering ``calls`` calls (default: every call received so far);
        ``ask`` is a driver's (its link and the checkpoint's ID)."""
        if calls < 0:
            calls = actor.seq
        asks = actor.pending.get(calls)
        if asks is None:
            asks = actor.pending[calls] = []
            actor.asked_at = calls
            if actor.state is not _WAITING and actor.sent == calls and not actor.restoring:
                self.send_at(actor, calls)
        if ask is not None:
            asks.append(ask)

    def send_at(self, actor: ActorRecord, calls: int) -> None:
        """The checkpoint frame due after ``calls`` calls, if one is asked for."""
        if calls in actor.pending and actor.worker is not None:
            restore = actor.covered if actor.covered >= 0 else None
            frame = Checkpoint(actor.actor_id, calls, None, restore)
            self._wire.links.send(actor.worker.link, frame)

    def written(self, actor: ActorRecord, event: Checkpointed) -> bool:
        """A checkpoint frame is answered: the asks on it too, and maybe a new restore
        point. True if the actor can no longer be rebuilt and waits to be (it must end).

        The head restores from `covered`, so that checkpoint must stay on disk: each
        checkpoint frame names it as the one to keep, and writing one removes the others.
        A worker writing one removes only the checkpoints older than the one its frame
        names, and a frame names the restore point as it was when sent, never a newer one:
        no frame on its way can remove a checkpoint the head has heard is written. So a
        written checkpoint becomes the restore point at once (`covered`, the calls it covers
        dropped, `Covered` to their callers), however many frames are on their way.
        """
        wire = self._wire
        calls = event.task_id
        asks = actor.pending.pop(calls, [])
        failure = event.failure
        for link, oid in asks:
            if link in wire.peers:
                answer = Result(oid, b"") if failure is None else Error(oid, failure)
                wire.links.send(link, answer)
        if failure is None:
            actor.failure = actor.warned = ""
            actor.checkpoints += 1
            if calls > actor.covered:
                self._cover(actor, calls)
            return False
        if failure != actor.warned and not asks:
            # Once per reason (a driver's own ask hears it in its answer instead).
            actor.warned = failure
            why = f"a checkpoint of actor {actor.actor_id:#x} failed: {failure}"
            for link in actor.callers:
                if link in wire.peers:
                    wire.links.send(link, Error(actor.actor_id, why, ERROR_WARNING))
        actor.failure = failure
        return actor.kept_bytes > 2 * self.keep_bytes and self.cut(actor)

    def _cover(self, actor: ActorRecord, calls: int) -> None:
        """Restore ``actor`` from the checkpoint covering ``calls`` calls from now on."""
        actor.covered = calls
        newest: dict[int, int] = {}
        for owner, (seq, oid) in list(actor.cut.items()):
            if seq <= calls:  # its calls cut past the budget are in this checkpoint
                newest[owner] = oid
                del actor.cut[owner]
        if not actor.cut:
            actor.lossy = False  # every call cut is in a checkpoint: it can be rebuilt again
        kept = actor.calls
        answered_at = self._answered_at
        while kept and kept[0].seq <= calls:
            call = kept.popleft()
            actor.kept_bytes -= kept_size(call.argument)
            newest[call.owner] = call.oid
            if answered_at:
                answered_at.pop(call.oid, None)
        covered_of = actor.covered_of
        wire = self._wire
        for link, oid in newest.items():
            number = oid >> ID_BITS
            if oid > covered_of.get(number, 0):
                covered_of[number] = oid
            if link in wire.peers:
                wire.links.send(link, Covered(actor.actor_id, oid))

    def over_budget(self, actor: ActorRecord) -> bool:
        """``actor`` keeps more than the budget: ask for a checkpoint, or cut calls if they
        fail. True if it can no longer be rebuilt and waits to be (it must end)."""
        if actor.failure and actor.kept_bytes > 2 * self.keep_bytes:
            return self.cut(actor)
        if not actor.pending:
            self.ask(actor, None)
        return False

    def cut(self, actor: ActorRecord) -> bool:
        """Drop the oldest kept calls down to the budget: the actor can't be rebuilt now.
        True if it waits to be rebuilt (after losing its worker, with failing checkpoints
        it has run before): replaying what is left would build a wrong state."""
        kept = actor.calls
        # Never one not sent yet (calls held back behind a checkpoint): it must still run.
        while kept and kept[0].seq <= actor.sent and actor.kept_bytes > self.keep_bytes:
            call = kept.popleft()
            actor.kept_bytes -= kept_size(call.argument)
            self._answered_at.pop(call.oid, None)
            call.argument = b""
            # Its caller keeps it until covered says a checkpoint includes it: remember it.
            actor.cut[call.owner] = (call.seq, call.oid)
        actor.lossy = True
        return actor.state is _WAITING
