"""A worker's actor: built, called, checkpointed and destroyed one piece at a time, in order.

The `Worker` core turns actor frames into `StartActor`, `CallActor`, `CheckpointActor` and
`StopActor` decisions in the order the head sent them; `ActorHost` runs them in that order
on a thread of its own (a greenlet in a gevent-patched worker), so a slow method never
stalls the loop and two calls never overlap. An ``async def`` method runs on the loop
while the actor's thread waits for it: still one call at a time. What it did goes back to
the core on the loop, in order, in batches (one wake-up for however many finished).

A checkpoint pickles the instance (``__getstate__``, or its ``__dict__``), its large
buffers out of band, and the checkpoint store (`dista_runtime._execution.checkpoints`) writes them as
they lie; a restore unpickles from the bytes read, without another copy. The checkpoint
also records, per caller, the newest of its calls it includes: the object ID of the call
(the caller's number is in its high bits).
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Final

import dista_proto as dp

from .._clock import now
from .._errors import CheckpointError
from .._net.contract import Loop
from .._values.codec import decode, decode_actor_call, encode_parts
from .._values.errors import message_from_exception
from .._values.registry import (
    ACTOR_BY_VALUE_ID,
    load_function,
    lookup,
    method_table,
    split_by_value,
)
from .call import encode_results
from .checkpoints import Checkpoint, CheckpointStore, Fenced, open_store
from .kept_answers import KeptAnswers

__all__ = ["ActorHost"]

#: The decisions `ActorHost` carries out (its worker's engine routes them to `handle`).
_Work = dp.StartActor | dp.CallActor | dp.CheckpointActor | dp.StopActor
_NO_STORE: Final = (
    "no checkpoint store: set DISTA_CHECKPOINT_URI (a directory, file:///path, or an fsspec "
    "URL such as s3://bucket/prefix) in the workers' environment"
)


class ActorHost:
    """Runs a worker core's actor work; see the module docstring. ``transmit`` carries out
    the core's decisions after a batch of reports (`Engine.transmit`)."""

    def __init__(self, core: dp.Worker, loop: Loop, transmit: Callable[[], None]) -> None:
        self.core = core
        self._loop = loop
        self._transmit = transmit
        # A C-level queue: handing a call to the actor's thread is one lock release.
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._reports: deque[Callable[[], None]] = deque()
        self._report_scheduled = False
        self._instance: object = None
        self._methods: dict[int, tuple[str, bool]] = {}  # method ID -> (name, async)
        self._covers: dict[int, int] = {}  # caller number -> newest call of its it ran
        self._actor = 0  # the actor built here (0: none)
        #: Calls it has seen in its heads' numbering (run, or covered by what it came from).
        self._label = 0
        #: Whether a call the state already has counts in ``_label``: only where the head
        #: was not told which those are (placed back with no checkpoint written).
        self._count_covered = False
        #: Recent calls' answers (values, or the failure): a resent call it ran gets its
        #: answer from here, on this worker or restored elsewhere (checkpoints carry them).
        self._answers = KeptAnswers()
        self._classes: dict[bytes, type] = {}  # by-value classes, by digest
        self._store: CheckpointStore | None = None
        self._store_error = ""
        self._store_opened = False
        #: This build of the actor in the store (`CheckpointStore.begin`; 0 without one).
        self._incarnation = 0
        #: Actors whose checkpoints go with them, queued and not yet removed (`stop`).
        self._forgetting: dict[int, int] = {}
        self._forgetting_lock = threading.Lock()

    # -- the loop's side -------------------------------------------------------------------

    def handle(self, work: _Work) -> None:
        """Queue ``work`` behind the rest (on the loop)."""
        self._work.put(work)
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="dista-actor", daemon=True)
            self._thread.start()

    def stop(self, work: dp.StopActor) -> None:
        """Queue a `StopActor` like `handle`, remembering an actor whose checkpoints go with
        it until the actor's thread has removed them: an exiting worker waits for that
        (`forgetting`), and removes them itself past its wait (`forget_now`)."""
        if work.forget:
            with self._forgetting_lock:
                self._forgetting[work.actor_id] = self._forgetting.get(work.actor_id, 0) + 1
        self.handle(work)

    def forgetting(self) -> bool:
        """Whether checkpoints of stopped actors are still to be removed."""
        return bool(self._forgetting)

    def forget_now(self) -> None:
        """Remove the checkpoints the actor's thread has not got to (it is busy, or stuck
        in a call): the worker is exiting and the thread goes with it."""
        with self._forgetting_lock:
            actors, self._forgetting = list(self._forgetting), {}
        store = self._open_store() if actors else None
        if store is None:
            return
        for actor in actors:
            try:
                store.remove(actor)
            except Exception:
                pass  # a store gone away: nothing to restore from anyway

    def _report(self, report: Callable[[], None]) -> None:
        """From the actor's thread: ``report`` runs on the loop, in order with the others."""
        self._reports.append(report)
        if not self._report_scheduled:
            self._report_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                pass  # the loop is gone: the worker is exiting

    def _drain(self) -> None:
        self._report_scheduled = False
        reports = self._reports
        while reports:
            reports.popleft()()
        self._transmit()

    # -- the actor's thread ----------------------------------------------------------------

    def _serve(self) -> None:
        while True:
            work = self._work.get()
            if isinstance(work, dp.CallActor):
                self._call(work)
            elif isinstance(work, dp.StartActor):
                self._start(work)
            elif isinstance(work, dp.CheckpointActor):
                self._checkpoint(work)
            else:
                self._stop(work)

    def _start(self, work: dp.StartActor) -> None:
        actor = work.actor_id
        if (
            work.covers == dp.RESTORE_NEWEST
            and self._instance is not None
            and self._actor == actor
        ):
            self._placed_back(work)
            return
        restored: int | None = None
        try:
            if work.covers is None:
                assert work.argument is not None
                self._begin(work, -1, None)
                instance = self._construct(work.type_id, work.argument)
                covers: dict[int, int] = {}
            elif work.covers == dp.RESTORE_NEWEST:
                # After a head restart: the newest checkpoint there is, if any.
                newest = self._newest(work)
                if newest is None:
                    why = f"actor {actor:#x} has no checkpoint to restore from"
                    self._report(
                        lambda: self.core.actors.actor_started(actor, why, no_checkpoint=True)
                    )
                    return
                instance, covers, restored = (
                    decode(newest.state),
                    dict(newest.covers),
                    newest.calls,
                )
                self._answers.load(newest.answers)
            else:
                instance, covers = self._restore(work, work.covers)
        except BaseException as e:  # SystemExit in a constructor fails the actor, no more
            error = message_from_exception(e)
            self._report(lambda: self.core.actors.actor_started(actor, error))
            return
        self._instance = instance
        self._actor = actor
        self._label = restored if restored is not None else (work.covers or 0)
        self._covers = covers
        self._count_covered = False
        self._methods = {i: (m, a) for m, (i, a) in method_table(type(instance)).items()}
        told = covers if restored is not None else None
        self._report(
            lambda: self.core.actors.actor_started(actor, None, covers=restored, newest=told)
        )

    def _placed_back(self, work: dp.StartActor) -> None:
        """A new head places the actor back here, where it lived on through the head's
        loss: its state answers, made the restore point by a checkpoint covering the calls
        it has seen (``uncovered`` if none can be written: the head asks again). It goes
        on as a new incarnation, numbered by the head that placed it back: a build a head
        before asked for that a cut-off worker runs only now is older, and fences it off
        no more than it would a copy that head itself built."""
        actor = work.actor_id
        calls = self._label
        uncovered = False
        stored = False  # a store to write to: the head can do without the calls it has
        try:
            store = self._open_store()
            if store is None:
                uncovered = True
            else:
                stored = True
                if self._incarnation and store.superseded(actor, self._incarnation):
                    raise Fenced(
                        f"actor {actor:#x}: this live copy (incarnation {self._incarnation}) "
                        "is stale: the actor was built again elsewhere since"
                    )
                self._begin(work, calls, self._incarnation)
                parts = encode_parts(self._instance, "the actor's state")
                covers = dict(self._covers)
                answers = self._answers.dump()
                store.write(
                    actor, self._incarnation, calls, covers, parts, answers=answers, prune=False
                )
        except Fenced as e:
            why = str(e)  # a stale copy: the head drops it, and waits for the newer one
            self._report(lambda: self.core.actors.actor_started(actor, why, fenced=True))
            return
        except Exception:  # unpicklable, a full disk: it lives on, not yet rebuildable
            uncovered = True
        # Told which calls its state has, the head numbers none of them; unless no store
        # (it would build the actor anew from its create and every call it keeps).
        told = dict(self._covers) if stored else None
        self._count_covered = told is None
        self._report(
            lambda: self.core.actors.actor_started(
                actor, None, covers=calls, uncovered=uncovered, newest=told
            )
        )

    def _begin(self, work: dp.StartActor, base: int, source: int | None) -> None:
        """A new incarnation of the actor in the store (created: ``base`` -1; or restored
        from incarnation ``source``'s checkpoint covering ``base`` calls), fencing off
        older builds of it (a cut-off worker that still runs). An instance kept alive
        through a head restart goes on as the incarnation it was."""
        self._incarnation = 0
        store = self._open_store()
        if store is None:
            return
        try:
            self._incarnation = store.begin(
                work.actor_id, base, source=source, build=work.build, epoch=work.epoch
            )
        except Exception:
            pass  # a store gone away: its checkpoints fail with the reason, the actor runs

    def _newest(self, work: dp.StartActor) -> Checkpoint | None:
        store = self._open_store()
        newest = None if store is None else store.newest(work.actor_id)
        if newest is not None:
            self._begin(work, newest.calls, newest.incarnation)
        return newest

    def _construct(self, type_id: int, argument: Any) -> object:
        if type_id & dp.TASK_ID_MASK == ACTOR_BY_VALUE_ID:
            digest, pickled, argument = split_by_value(argument)
            known = self._classes.get(digest)
            if known is None:
                loaded: Any = load_function(pickled)
                known = self._classes[digest] = loaded
            cls = known
        else:
            found = lookup(type_id)
            if not isinstance(found, type):
                raise LookupError(
                    f"actor type {type_id:#x} is not registered on this worker: start the "
                    "worker with --import of the module that defines it"
                )
            cls = found
        args, kwargs = decode_actor_call(argument)
        return cls(*args, **kwargs)

    def _restore(self, work: dp.StartActor, covers: int) -> tuple[object, dict[int, int]]:
        store = self._open_store()
        if store is None:
            raise CheckpointError(self._store_error)
        checkpoint = store.read(work.actor_id, covers)
        self._begin(work, covers, checkpoint.incarnation)
        self._answers.load(checkpoint.answers)
        return decode(checkpoint.state), dict(checkpoint.covers)

    def _call(self, work: dp.CallActor) -> None:
        oid = work.object_id
        caller = oid >> dp.ID_BITS
        if oid <= self._covers.get(caller, 0):
            # The checkpoint this actor came back from has it (a call resent after a head
            # restart): running it again would apply it twice. Its answer, if kept here,
            # still reaches its caller. It takes no place in the order (the head, told
            # which calls the checkpoint has, numbers none of them).
            if self._count_covered:
                self._label += 1
            answer = self._answers.get(oid)
            if answer is None:
                self._report(lambda: self.core.call_covered(oid))
            elif isinstance(answer, str):
                why = answer
                self._report(lambda: self.core.task_failed(oid, why, 0, 0))
            else:
                values = answer
                self._report(lambda: self.core.task_done(oid, values, 0, 0))
            return
        self._label += 1
        started = now()
        self._covers[caller] = oid
        try:
            found = self._methods.get(work.method_id)
            if self._instance is None or found is None:
                raise LookupError(
                    f"actor {work.actor_id:#x} has no method {work.method_id:#x}"
                    if self._instance is not None
                    else f"actor {work.actor_id:#x} is not running on this worker"
                )
            name, is_async = found
            args, kwargs = decode_actor_call(work.argument)
            method = getattr(self._instance, name)
            value = method(*args, **kwargs)
            if is_async:
                value = self._on_loop(value)
            values = encode_results(value, 1)
        except BaseException as e:  # one call's failure, whatever it raised
            error = message_from_exception(e)
            ended = now()
            self._answers.keep(oid, error)
            self._report(lambda: self.core.task_failed(oid, error, started, ended))
            return
        ended = now()
        self._answers.keep(oid, values)
        self._report(lambda: self.core.task_done(oid, values, started, ended))

    def _on_loop(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the worker's loop and wait for it here."""
        done = threading.Event()
        box: list[tuple[bool, Any]] = []

        async def run() -> None:
            try:
                box.append((True, await coro))
            except BaseException as e:
                box.append((False, e))
            finally:
                done.set()

        self._loop.call_soon_threadsafe(self._loop.create_task, run())
        done.wait()
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def _checkpoint(self, work: dp.CheckpointActor) -> None:
        failure: str | None = None
        written = ""
        store = None
        try:
            store = self._open_store()
            if store is None:
                failure = self._store_error
            elif self._instance is None:
                failure = f"actor {work.actor_id:#x} is not running on this worker"
            else:
                parts = encode_parts(self._instance, "the actor's state")
                covers = dict(self._covers)
                written = store.write(
                    work.actor_id,
                    self._incarnation,
                    work.calls,
                    covers,
                    parts,
                    answers=self._answers.dump(),
                    prune=False,
                )
        except TypeError as e:  # unpicklable state: the actor goes on
            failure = (
                f"{e} (an actor can define __getstate__ and __setstate__ to leave out "
                "what cannot be pickled and rebuild it)"
            )
        except Exception as e:  # a full disk, a store gone away: the actor goes on
            failure = str(e) if isinstance(e, CheckpointError) else repr(e)
        self._report(lambda: self.core.actors.checkpointed(work.actor_id, work.calls, failure))
        if store is not None and written:
            try:  # after the answer: removing the older ones is nobody's wait
                keep = -1 if work.keep is None else work.keep  # None: no restore point yet
                store.prune(work.actor_id, written, keep)
            except Exception:
                pass  # left for the next write to remove

    def _stop(self, work: dp.StopActor) -> None:
        if self._actor == work.actor_id or self._instance is None:
            self._instance = None  # (a forget for another actor leaves ours alone)
            self._actor = 0
            self._methods = {}
            self._covers = {}
        if work.forget:
            store = self._open_store()
            if store is not None:
                try:
                    store.remove(work.actor_id)
                except Exception:
                    pass  # a store gone away: nothing to restore from anyway
            with self._forgetting_lock:  # removed: an exiting worker need not wait for it
                left = self._forgetting.pop(work.actor_id, 0) - 1
                if left > 0:
                    self._forgetting[work.actor_id] = left

    def _open_store(self) -> CheckpointStore | None:
        if not self._store_opened:
            self._store_opened = True
            try:
                self._store = open_store()
            except CheckpointError as e:
                self._store_error = str(e)
            else:
                if self._store is None:
                    self._store_error = _NO_STORE
        return self._store
