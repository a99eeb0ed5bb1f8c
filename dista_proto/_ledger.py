"""What a driver must tell a new head to resume: every object it still needs, and how.

The page: after a head restart a driver "sends, in order of submission, each object it
still needs: a small result or error back as a result or error frame, a result on a worker
as claim, and an unfinished task as the task or task-after frame it first sent; then
resumed", with "each live actor's actor-create again, in order with everything else, then
every call it still keeps: those answered too, after their answers".

An object is needed while the driver holds it, and also after its release while an
unfinished task of the driver's takes it as input (the new head must know it to run that
task). Such a release is not sent to the head until that task is answered (`released`,
`take_releases`): a head that forgot the input once the task ran, with the task's answer
then lost with it, left a new head nothing to run the task again with. A task's frame is kept while one of its results is needed and unanswered; it is
sent again in place of those results. The first answer to an object counts: one arriving
again (a task the new head ran twice) is dropped, except that a new location replaces the
old one (an object adopted off a draining worker).

A task the driver cancelled is not sent again: its results still unanswered when it resumes
(the answer "cancelled" was on its way, or the head never saw the cancel) fail here with
"cancelled" and go to the head as error frames. A call a checkpoint covers is sent again
until answered (`KeptCalls.covered`: a new head answers it from the checkpoint); one the
driver let go over its keep budget whose answer was lost with a head that restarted cannot
be run again; resuming on the same head (its epoch unchanged), it is claimed instead: that
head still has its answer.

What it keeps is counted (`inflight_bytes`): the argument bytes of every task frame kept
(from its submission until its last needed result is answered, the same span in which its
bytes may still wait to be written) and of every actor call not answered yet (answered
calls kept for a resume have their own budget, `KeptCalls`). The runtime holds a
submitter back while it is over its budget (``DISTA_DRIVER_INFLIGHT_BYTES``).
"""

from __future__ import annotations

from typing import Final, TypeAlias

from ._events import (
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorLookup,
    ActorName,
    ActorOpen,
    ActorOrder,
    Address,
    Checkpoint,
    Claim,
    Error,
    Event,
    Release,
    Result,
    Task,
    TaskAfter,
    TaskMany,
)
from .frame import Bytes

__all__ = ["Ledger", "argument_bytes"]

#: An object's answer as the driver has it: its value, its failure, or where it lies.
Answer: TypeAlias = Result | Error | Address
_PENDING: Final = None
#: Calls an actor-order frame names at most (16 bytes each: 64 KiB frames).
_ORDER_PAIRS: Final = 4096


class Ledger:
    """A driver's record for resuming (see the module docstring)."""

    __slots__ = (
        "_answers",
        "_asks",
        "_call_bytes",
        "_cancelled",
        "_creates",
        "_first",
        "_frames",
        "_killed",
        "_left",
        "_looked",
        "_names",
        "_opens",
        "_released",
        "_releasing",
        "_users",
        "inflight_bytes",
    )

    def __init__(self) -> None:
        #: Objects still needed -> their answer, or None while it has not come.
        self._answers: dict[int, Answer | None] = {}
        #: Tasks with a result still needed and unanswered -> the frame first sent.
        self._frames: dict[int, Task | TaskMany | TaskAfter] = {}
        self._left: dict[int, int] = {}  # such a task -> results needed and unanswered
        self._first: dict[int, int] = {}  # a task-many's later results -> its first
        self._users: dict[int, int] = {}  # object -> unfinished task-afters taking it
        self._released: set[int] = set()  # released, but kept for a task that takes it
        self._releasing: list[int] = []  # of those, ones whose tasks are answered now
        self._creates: dict[int, ActorCreate] = {}  # live actors this driver made
        #: Actors it killed whose end the head has not confirmed (an error frame for the
        #: actor): a new head creates them again and kills them, so that the actor still
        #: alive on its worker, and its checkpoints, go (the kill may have gone nowhere).
        self._killed: dict[int, tuple[ActorCreate, bytes | None, ActorKill]] = {}
        self._cancelled: set[int] = set()  # tasks in ``_frames`` the driver cancelled
        self._call_bytes: dict[int, int] = {}  # actor call not answered -> its argument bytes
        #: Argument bytes of the task frames kept and the actor calls not answered.
        self.inflight_bytes = 0
        #: Live actors -> the capability this driver showed the head for them (actor-open):
        #: its own, right after their creates, and those of handles it was given.
        self._opens: dict[int, bytes] = {}
        #: Named actors: name and look-up requests not answered yet, by request ID; the
        #: names of the live actors this driver made; and those of the actors it looked up
        #: and holds (a new head hears both again, `frames`).
        self._asks: dict[int, ActorName | ActorLookup] = {}
        self._names: dict[int, ActorName] = {}
        self._looked: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._answers)

    # -- as the driver goes ----------------------------------------------------------------

    def submitted(self, frame: Task | TaskMany | TaskAfter, results: int) -> None:
        oid = frame.object_id
        answers = self._answers
        for i in range(oid, oid + results):
            answers[i] = _PENDING
        if results > 1:
            first = self._first
            for i in range(oid + 1, oid + results):
                first[i] = oid
        self._frames[oid] = frame
        self.inflight_bytes += argument_bytes(frame)
        self._left[oid] = results
        if isinstance(frame, TaskAfter):
            users = self._users
            for i in frame.inputs:
                users[i] = users.get(i, 0) + 1

    def called(self, oid: int, argument: Bytes = b"") -> None:
        """An actor call's result (its frame is kept by the driver's actor bookkeeping),
        its ``argument`` counted in flight until it is answered."""
        self._answers[oid] = _PENDING
        nbytes = _nbytes(argument)
        if nbytes:
            self._call_bytes[oid] = nbytes
            self.inflight_bytes += nbytes

    def created(self, create: ActorCreate) -> None:
        self._creates[create.object_id] = create

    def opened(self, actor: int, capability: bytes) -> bool:
        """This driver shows ``actor``'s capability; False if it did already."""
        if self._opens.get(actor) == capability:
            return False
        self._opens[actor] = capability
        return True

    def ended(self, actor: int, kill: ActorKill | None = None) -> None:
        """The actor was killed (``kill``: by this driver) or is gone: it is not created (or
        opened) again, but for a kill the head may not have heard (`confirmed`)."""
        create = self._creates.pop(actor, None)
        capability = self._opens.pop(actor, None)
        if kill is not None and create is not None:
            self._killed[actor] = (create, capability, kill)
        self._names.pop(actor, None)
        self._looked.pop(actor, None)

    def confirmed(self, actor: int) -> None:
        """The head said ``actor`` ended: a kill of it is not sent again."""
        if self._killed:
            self._killed.pop(actor, None)

    def asked_name(self, event: ActorName | ActorLookup) -> None:
        """A name or a look-up asked of the head, kept until it is answered."""
        self._asks[event.request if isinstance(event, ActorName) else event.object_id] = event
        if isinstance(event, ActorName):
            self._names[event.object_id] = event

    def named(self, actor: int) -> bool:
        """Whether ``actor`` is a named actor this driver made or looked up (its leaving
        lets go of it, as its last handle going does, rather than ending it for all)."""
        return actor in self._names or actor in self._looked

    def _name_answered(self, request: int, answer: Answer) -> None:
        event = self._asks.pop(request)
        if isinstance(event, ActorName):
            if isinstance(answer, Result):
                self._names[event.object_id] = ActorName(event.object_id, 0, event.name)
            else:
                self._names.pop(event.object_id, None)  # taken: the create is refused
        elif isinstance(answer, Result) and len(answer.value) >= 8:
            actor = int.from_bytes(bytes(answer.value[:8]), "little")
            self._looked[actor] = event.name

    def answered(self, oid: int, answer: Answer) -> bool | None:
        """Record the answer: True if it is the object's first, False if it had one (the
        driver drops answers after the first once it has resumed), None for an object
        not needed (released, or not minted here)."""
        answers = self._answers
        if oid not in answers:
            if oid in self._asks:
                self._name_answered(oid, answer)
                return True
            return None
        had = answers[oid]
        if had is not _PENDING:
            if isinstance(answer, Address) and isinstance(had, Address):
                answers[oid] = answer  # it moved (adopted off a draining worker)
            return False
        answers[oid] = answer
        self._one_less(oid)
        return True

    def pending(self, oid: int) -> bool:
        """Whether ``oid`` is needed and not answered yet."""
        return oid in self._answers and self._answers[oid] is _PENDING

    def released(self, oid: int) -> bool:
        """The driver released ``oid``: True if the head must not hear it yet (an
        unfinished task of ours takes it: it goes once that task is answered)."""
        if self._users.get(oid):
            self._released.add(oid)
            return True
        self._drop(oid)
        return False

    def take_releases(self) -> list[int]:
        """Releases held back that may go now (their tasks are answered)."""
        out, self._releasing = self._releasing, []
        return out

    def cancel(self, oid: int) -> None:
        """The driver cancelled the task ``oid`` is a result of: it is not sent again."""
        task = self._first.get(oid, oid)
        if task in self._frames:
            self._cancelled.add(task)

    def cancelled(self) -> list[int]:
        """The results, needed and unanswered, of the tasks the driver cancelled: the
        driver fails them itself (the head may never say so: it is away, or a new one)."""
        answers = self._answers
        out: list[int] = []
        for task in sorted(self._cancelled):
            frame = self._frames.get(task)
            if frame is not None:
                out.extend(
                    i
                    for i in range(task, task + _results(frame))
                    if i in answers and answers[i] is _PENDING
                )
        return out

    def leaving(self) -> tuple[list[int], list[int], list[int]]:
        """For a driver that is done: its unfinished tasks, every object it needs, and its
        live actors, those it made and those it looked up by name (it holds them)."""
        actors = sorted({*self._creates, *self._looked})
        return sorted(self._frames), sorted(self._answers), actors

    # -- resuming ------------------------------------------------------------------------

    def frames(
        self,
        kept: list[ActorCall],
        asks: dict[int, int],
        same_head: bool = False,
        positions: dict[int, int] | None = None,
    ) -> tuple[list[Event], list[int]]:
        """Everything to send a new head, in the page's order, ending before resumed; and
        the actor calls whose answers are lost (see `Driver`). ``same_head``: the head is
        the one the driver last spoke to (its epoch unchanged), which still has them.
        ``positions``: where kept calls ran in their actors' order (their answers said),
        sent before the calls (actor-order)."""
        out: list[Event] = []
        lost = self._lost(kept)
        claimed = set(lost) if same_head else set()
        if same_head:
            lost = []
        for oid in lost:
            self._drop(oid)
        answers = self._answers
        frames = self._frames
        first = self._first
        creates = self._creates
        releases: list[int] = []
        for oid in sorted({*answers, *frames, *creates}):
            create = creates.get(oid)
            if create is not None:
                out.append(create)
                if oid in self._opens:
                    out.append(ActorOpen(oid, self._opens[oid]))  # its capability, at once
                if oid in self._names:
                    out.append(self._names[oid])  # its name, after: the head knows it then
                continue
            frame = frames.get(oid)
            if frame is not None:
                out.append(frame)
                results = _results(frame)
                releases.extend(i for i in range(oid, oid + results) if i not in answers)
                continue
            if first.get(oid, -1) in frames:
                continue  # its task is sent again
            answer = answers.get(oid)
            if answer is None:
                if oid in claimed:
                    out.append(Claim(oid))  # its answer was on its way: the head has it
                continue  # an actor call not answered: sent with the calls
            out.append(Claim(oid) if isinstance(answer, Address) else answer)
        # The actors of others this driver opened, before its calls to them.
        out.extend(ActorOpen(a, c) for a, c in sorted(self._opens.items()) if a not in creates)
        # Names of actors whose creates wait for their refs, those looked up (still held:
        # request 0, no answer), then look-ups not answered yet.
        out.extend(n for a, n in sorted(self._names.items()) if a not in creates)
        out.extend(ActorLookup(0, name) for _, name in sorted(self._looked.items()))
        out.extend(e for e in self._asks.values() if isinstance(e, ActorLookup))
        if positions:
            out.extend(_orders(kept, positions))
        for call in kept:
            out.append(call)
            if call.object_id not in answers:
                releases.append(call.object_id)  # answered and released: run for the state
        # Actors killed while the head may not have heard: made and ended again, after the
        # calls (a kill after calls lets them run first).
        for create, capability, kill in self._killed.values():
            out.append(create)
            if capability is not None:
                out.append(ActorOpen(create.object_id, capability))
            out.append(kill)
        out.extend(Checkpoint(oid, 0, actor) for oid, actor in asks.items())
        out.extend(Release(oid) for oid in releases)
        return out, lost

    def _lost(self, kept: list[ActorCall]) -> list[int]:
        """Objects waiting for an answer that no frame sent again brings: actor calls the
        driver let go over its keep budget (a checkpoint asked for covers them) whose
        answers were on their way when the head went. They must not run twice."""
        waiting = {c.object_id for c in kept}
        first = self._first
        frames = self._frames
        return [
            oid
            for oid, answer in self._answers.items()
            if answer is _PENDING
            and oid not in waiting
            and oid not in frames
            and first.get(oid, -1) not in frames
        ]

    # -- bookkeeping -----------------------------------------------------------------------

    def _one_less(self, oid: int) -> None:
        """One result of ``oid``'s task (or ``oid``, an actor call) no longer waits for its
        answer."""
        if self._call_bytes:
            nbytes = self._call_bytes.pop(oid, 0)
            self.inflight_bytes -= nbytes
        task = self._first.get(oid, oid)
        left = self._left.get(task)
        if left is None:
            return
        if left > 1:
            self._left[task] = left - 1
            return
        del self._left[task]
        frame = self._frames.pop(task)
        self.inflight_bytes -= argument_bytes(frame)
        self._cancelled.discard(task)
        if isinstance(frame, TaskMany) or (isinstance(frame, TaskAfter) and frame.results):
            results = frame.results or 1
            for i in range(task + 1, task + results):
                self._first.pop(i, None)
        if isinstance(frame, TaskAfter):
            users = self._users
            for i in frame.inputs:
                n = users.get(i, 0) - 1
                if n > 0:
                    users[i] = n
                    continue
                users.pop(i, None)
                if i in self._released:
                    self._released.discard(i)
                    self._releasing.append(i)
                    self._drop(i)

    def _drop(self, oid: int) -> None:
        answers = self._answers
        if oid in answers and answers.pop(oid) is _PENDING:
            self._one_less(oid)


def argument_bytes(frame: Task | TaskMany | TaskAfter) -> int:
    """The bytes of a task frame's argument (a task-after's value), as kept."""
    data = frame.value if isinstance(frame, TaskAfter) else frame.argument
    return 0 if data is None else _nbytes(data)


def _nbytes(data: Bytes) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


def _results(frame: Task | TaskMany | TaskAfter) -> int:
    """How many results a task frame has."""
    if isinstance(frame, TaskMany):
        return frame.results
    if isinstance(frame, TaskAfter):
        return frame.results or 1
    return 1


def _orders(kept: list[ActorCall], positions: dict[int, int]) -> list[ActorOrder]:
    """Actor-order frames for the ``kept`` calls whose ``positions`` are known, per actor,
    `_ORDER_PAIRS` calls a frame at most."""
    by_actor: dict[int, list[tuple[int, int]]] = {}
    for call in kept:
        position = positions.get(call.object_id)
        if position:
            by_actor.setdefault(call.actor_id, []).append((call.object_id, position))
    return [
        ActorOrder(actor, tuple(pairs[i : i + _ORDER_PAIRS]))
        for actor, pairs in by_actor.items()
        for i in range(0, len(pairs), _ORDER_PAIRS)
    ]
