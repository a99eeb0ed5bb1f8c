"""The worker's side of actors: one actor at a time, its work in the order it came.

The page: "An actor lives on one worker, which runs nothing else while it hosts it. The
worker answers actor-create with an empty result, or the constructor's error, and each call
like a task: a result, stored or error frame for the call's object ID. [...] A checkpoint
runs between calls too: the worker writes the actor's state to DISTA_CHECKPOINT_URI and
answers checkpointed. Actor-restore builds an actor from its checkpoint instead of its
constructor, and is answered like actor-create."

Each frame becomes one decision (`StartActor`, `CallActor`, `CheckpointActor`,
`StopActor`) in arrival order; the binding runs them one at a time in that order and
reports back (`Worker.actors`: `actor_started`, `checkpointed`; `task_done`/`task_failed` for calls). A call
or checkpoint for an actor this worker does not host gets an error frame, as does a second
actor. Work handed to the binding before the head link was lost is the old incarnation's:
its reports, which come before any for later work (one per piece, in order), are dropped, so
that a worker that rejoined and hosts the actor again does not answer the new head with
them (a restore answered with a stale start, a checkpoint the new head never asked for, a
call's answer from the old state).

`Worker` holds one `ActorHosting` and routes the head's actor frames to it. A call handed
to the binding is a job of the worker like a task (`call` says so, and the worker notes
it); its report comes to the worker, which asks `stale` whether to drop it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._conventions import (
    ERROR_FENCED,
    ERROR_NO_CHECKPOINT,
    HEAD_LINK,
    ID_BITS,
    KILL_KEEP,
    RESTORE_NEWEST,
    hosts_mark,
)
from ._decisions import CallActor, CheckpointActor, StartActor, StopActor
from ._events import (
    ActorBuild,
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorRestore,
    Checkpoint,
    Checkpointed,
    Error,
    Result,
)
from ._links import Links

__all__ = ["ActorHosting"]


class ActorHosting:
    """The actor a worker hosts, and the actor work handed to its binding."""

    __slots__ = (
        "_build",
        "_calls",
        "_checkpoints",
        "_links",
        "_stale_calls",
        "_stale_checkpoints",
        "_stale_starts",
        "_starts",
        "_told",
        "actor",
        "calls",
        "unplaced",
    )

    def __init__(self, links: Links) -> None:
        self._links = links
        #: The actor this worker hosts (0: none).
        self.actor: int = 0
        #: The calls it has seen in its heads' numbering, with those handed to the binding
        #: (which runs them all, in order, even past a head loss); -1: not known yet (a
        #: restore of the newest checkpoint not answered).
        self.calls: int = -1
        #: It rejoined hosting the actor alive, and no head has placed it back yet.
        self.unplaced: bool = False
        #: The actor-build that numbered the next start (`numbered`), if one did.
        self._build: ActorBuild | None = None
        #: Actor work handed to the binding and not reported yet: starts and checkpoints
        #: (counted), calls (ID -> count); and of those, the ones handed out before the head
        #: link was lost (`head_lost`), whose reports are dropped.
        self._starts = 0
        self._checkpoints = 0
        self._calls: dict[int, int] = {}
        self._stale_starts = 0
        self._stale_checkpoints = 0
        self._stale_calls: dict[int, int] = {}
        #: Per caller, the newest call the checkpoint it came back from includes, as the
        #: head was told (`actor_started`): the head numbers none of those calls, so they
        #: are not counted here either.
        self._told: dict[int, int] = {}

    # -- the head's frames ---------------------------------------------------------------
    # Each takes the frame and the time, the shape of every `Worker` head-frame handler.

    def call(self, event: ActorCall, now: int) -> bool:
        """An actor call: True if it went to the binding (a job of the worker's until
        reported), False if it was answered here (the actor is not on this worker)."""
        if event.actor_id != self.actor or not self.actor:
            self._not_here(event.object_id, event.actor_id)
            return False
        oid = event.object_id
        self._calls[oid] = self._calls.get(oid, 0) + 1
        if self.calls >= 0 and (not self._told or oid > self._told.get(oid >> ID_BITS, 0)):
            self.calls += 1
        self._links.queue(CallActor(oid, event.task_id, event.actor_id, event.argument, now))
        return True

    def numbered(self, event: ActorBuild, now: int) -> None:
        """Actor-build: the head's number for the actor-create or actor-restore that
        follows (its checkpoint store fences by it)."""
        self._build = event

    def start(self, event: ActorCreate | ActorRestore, now: int) -> None:
        """Actor-create or actor-restore: build the actor, unless another is hosted here."""
        actor = event.object_id
        build, self._build = self._build, None
        if build is not None and build.object_id != actor:
            build = None  # (numbered another actor's start: not this one's)
        if self.actor and self.actor != actor and self.unplaced:
            # A head that knows only the page (which has every rejoining worker destroy
            # its actor) builds another here: the live copy goes, its checkpoints stay.
            self._links.queue(StopActor(self.actor, False))
            self.actor = 0
        self.unplaced = False
        if self.actor and self.actor != actor:
            why = f"this worker already hosts actor {self.actor:#x}"
            self._links.send(HEAD_LINK, Error(actor, why))
            return
        if isinstance(event, ActorCreate):
            self.calls = 0
        elif event.covers != RESTORE_NEWEST:
            self.calls = event.covers
        elif self.actor != actor:
            self.calls = -1  # (the actor alive here, placed back: its count goes on)
        self.actor = actor
        self._told = {}
        self._starts += 1
        number, epoch = (build.build, build.epoch) if build is not None else (0, 0)
        if isinstance(event, ActorCreate):
            start = StartActor(actor, event.task_id, event.argument, None, number, epoch)
        else:
            start = StartActor(actor, event.task_id, None, event.covers, number, epoch)
        self._links.queue(start)

    def checkpoint(self, event: Checkpoint, now: int) -> None:
        """A checkpoint of the hosted actor, between its calls."""
        actor = event.object_id
        if actor != self.actor or not actor:
            why = f"actor {actor:#x} is not on this worker"
            self._links.send(HEAD_LINK, Checkpointed(actor, event.task_id, why))
            return
        self._checkpoints += 1
        self._links.queue(CheckpointActor(actor, event.task_id, event.restore_covers))

    def kill(self, event: ActorKill, now: int) -> None:
        """Actor-kill: stop the hosted actor; for another (an actor that ended where no
        worker hosted it), remove its checkpoints: this worker has the store."""
        if event.object_id == self.actor and self.actor:
            self.actor = 0
            self.unplaced = False
            # Moving to another worker (ours drains): its checkpoints are its way there.
            self._links.queue(StopActor(event.object_id, event.mark != KILL_KEEP))
        elif event.mark != KILL_KEEP and event.object_id:
            self._links.queue(StopActor(event.object_id, True))

    def _not_here(self, oid: int, actor: int) -> None:
        self._links.send(HEAD_LINK, Error(oid, f"actor {actor:#x} is not on this worker"))

    def actor_started(
        self,
        actor: int,
        error: str | None,
        *,
        covers: int | None = None,
        no_checkpoint: bool = False,
        uncovered: bool = False,
        fenced: bool = False,
        newest: Mapping[int, int] | None = None,
    ) -> None:
        """The binding built ``actor`` (``error`` None) or could not (why not). Restoring
        the newest checkpoint (`RESTORE_NEWEST`): ``covers`` is the calls it covers, or
        ``no_checkpoint`` says there is none (the head sends actor-create then). The actor
        still alive here (its head link was lost, not its process) answers with the calls it has seen, and
        ``uncovered`` if no checkpoint covers them (none could be written), or says
        it is ``fenced`` off (stale: the actor was built again elsewhere since). ``newest``:
        per caller, the newest call the state it answers from includes (its checkpoint's),
        told the head after the count (8 bytes per call ID) so that it numbers no call
        resent that the state has already."""
        self._starts = max(self._starts - 1, 0)
        if self._stale_starts:
            self._stale_starts -= 1
            return  # a start from before the head was lost
        if error is None:
            if covers is not None and actor == self.actor:
                self.calls = covers
            payload = b"" if covers is None else covers.to_bytes(8, "little")
            if uncovered:
                payload += b"\x01"  # (a head that knows only the page reads 8 bytes)
            if covers is not None and newest:
                self._told = dict(newest)
                payload += b"".join(oid.to_bytes(8, "little") for oid in sorted(newest.values()))
            self._links.send(HEAD_LINK, Result(actor, payload))
        else:
            if self.actor == actor and not fenced:
                self.actor = 0  # the next create may come here (a stale one: the kill)
            mark = ERROR_NO_CHECKPOINT if no_checkpoint else ERROR_FENCED if fenced else 0
            self._links.send(HEAD_LINK, Error(actor, error, mark))

    def checkpointed(self, actor: int, calls: int, failure: str | None) -> None:
        """The binding wrote ``actor``'s checkpoint covering ``calls`` calls, or could not."""
        self._checkpoints = max(self._checkpoints - 1, 0)
        if self._stale_checkpoints:
            self._stale_checkpoints -= 1
            return  # asked for by the head that was lost
        self._links.send(HEAD_LINK, Checkpointed(actor, calls, failure))

    def stale(self, oid: int) -> bool:
        """A report for ``oid`` came (a call's, or a task's): whether it is a call handed
        out before the head was lost (dropped; a call the new head sent here again is
        reported after it)."""
        if not self._calls:
            return False  # no call out: a task's
        count = self._calls.get(oid)
        if count is None:
            return False  # a task's
        if count > 1:
            self._calls[oid] = count - 1
        else:
            del self._calls[oid]
        stale = self._stale_calls.get(oid)
        if not stale:
            return False
        if stale > 1:
            self._stale_calls[oid] = stale - 1
        else:
            del self._stale_calls[oid]
        return True

    def head_lost(self) -> None:
        """The head link is lost: the actor lives on (a new head places it back here), and
        the actor work handed to the binding is the old head's: it runs on, in the order
        that head sent it (the state every answer came from), but its reports are dropped
        (a resent call it ran is answered from the answers the binding keeps)."""
        self._stale_starts = self._starts
        self._stale_checkpoints = self._checkpoints
        self._stale_calls = dict(self._calls)

    def rejoined(self) -> None:
        """Said hello and holding to a head again: tell it the actor still lives here."""
        if self.actor:
            why = f"this worker still hosts actor {self.actor:#x}, alive"
            calls = max(self.calls, 0)
            self._links.send(HEAD_LINK, Error(self.actor, why, hosts_mark(calls)))
            self.unplaced = True
