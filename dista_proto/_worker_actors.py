"""The worker's side of actors: one actor at a time, its work in the order it came.

The page: "An actor lives on one worker, which runs nothing else while it hosts it. The
worker answers actor-create with an empty result, or the constructor's error, and each call
like a task: a result, stored or error frame for the call's object ID. [...] A checkpoint
runs between calls too: the worker writes the actor's state to DISTA_CHECKPOINT_URI and
answers checkpointed. Actor-restore builds an actor from its checkpoint instead of its
constructor, and is answered like actor-create."

Each frame becomes one decision (`StartActor`, `CallActor`, `CheckpointActor`,
`StopActor`) in arrival order; the binding runs them one at a time in that order and
reports back (`actor_started`, `task_done`/`task_failed` for calls, `checkpointed`). A call
or checkpoint for an actor this worker does not host gets an error frame, as does a second
actor. `Worker` inherits this; the state it reads is the worker's own.
"""

from __future__ import annotations

from ._conventions import HEAD_LINK
from ._decisions import CallActor, CheckpointActor, StartActor, StopActor
from ._events import (
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorRestore,
    Checkpoint,
    Checkpointed,
    Error,
    Event,
    Result,
)
from ._links import Links

__all__ = ["ActorHosting"]


class ActorHosting:
    """The actor half of `Worker`."""

    _links: Links
    _jobs: dict[int, tuple[int, int]]  # first result ID -> (results, arrived)
    #: The actor this worker hosts (0: none).
    actor = 0

    def _on_actor_event(self, event: Event, now: int) -> bool:
        """Take an actor frame from the head; False if ``event`` is not one."""
        if isinstance(event, ActorCall):
            if event.actor_id != self.actor or not self.actor:
                self._not_here(event.object_id, event.actor_id)
                return True
            self._jobs[event.object_id] = (1, now)
            call = CallActor(event.object_id, event.task_id, event.actor_id, event.argument, now)
            self._links.queue(call)
        elif isinstance(event, (ActorCreate, ActorRestore)):
            actor = event.object_id
            if self.actor and self.actor != actor:
                why = f"this worker already hosts actor {self.actor:#x}"
                self._links.send(HEAD_LINK, Error(actor, why))
                return True
            self.actor = actor
            if isinstance(event, ActorCreate):
                self._links.queue(StartActor(actor, event.task_id, event.argument))
            else:
                self._links.queue(StartActor(actor, event.task_id, None, event.covers))
        elif isinstance(event, Checkpoint):
            actor = event.object_id
            if actor != self.actor or not actor:
                why = f"actor {actor:#x} is not on this worker"
                self._links.send(HEAD_LINK, Checkpointed(actor, event.task_id, why))
                return True
            self._links.queue(CheckpointActor(actor, event.task_id, event.restore_covers))
        elif isinstance(event, ActorKill):
            if event.object_id == self.actor and self.actor:
                self.actor = 0
                self._links.queue(StopActor(event.object_id))
        else:
            return False
        return True

    def _not_here(self, oid: int, actor: int) -> None:
        self._links.send(HEAD_LINK, Error(oid, f"actor {actor:#x} is not on this worker"))

    def actor_started(self, actor: int, error: str | None) -> None:
        """The binding built ``actor`` (``error`` None) or could not (why not)."""
        if error is None:
            self._links.send(HEAD_LINK, Result(actor, b""))
        else:
            if self.actor == actor:
                self.actor = 0  # the next create may come here
            self._links.send(HEAD_LINK, Error(actor, error))

    def checkpointed(self, actor: int, calls: int, failure: str | None) -> None:
        """The binding wrote ``actor``'s checkpoint covering ``calls`` calls, or could not."""
        self._links.send(HEAD_LINK, Checkpointed(actor, calls, failure))
