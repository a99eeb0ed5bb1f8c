"""A session's actors: creating, calling, checkpointing and killing them, in order.

A call whose arguments hold refs waits here until their values are read (fetched from
workers if need be), then goes out with those values packed after it (`pack_inputs`); the
calls made after it to the same actor wait behind it, so each actor still sees this
caller's calls in the order they were made. Its ref is given out at once, from an ID the
core reserves. The refs it waits for are pinned: a release of one meanwhile is held back
until the call has gone. A call sent at once waits first while the session is over its
budget of in-flight argument bytes (`budget`), as a task's submit does.

The actor's own ID has a slot too (its answer: created, or why not, or why it died later).
The handles a driver makes are counted: when the last one goes, the actor is killed. A
checkpoint the caller asks for gets a slot that is dropped, not released, once answered:
the head keeps no object for it.

`SessionActors` is a part the `Session` holds (``session.actors``), not a base it inherits:
it owns the state above and is given what it shares with its session, explicitly: the core,
the I/O, the one lock and the slots that lock guards, the hooks, and the few things it reads
of the session live (`SessionHost`: whether it is closed, and its `poll`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, Final, Protocol

import dista_proto as dp
from dista_proto.frame import Bytes

from .._errors import CheckpointError, GetTimeoutError
from .._net.latch import Latch
from .._values.codec import pack_inputs
from .._values.errors import error_from_message
from .awaiting import wait_latch
from .slots import FAILED as _FAILED
from .slots import LOCATED as _LOCATED
from .slots import VALUE as _VALUE
from .slots import SessionIO
from .slots import Slot as _Slot

__all__ = ["KEEP_BYTES_ENV", "SessionActors", "SessionHost", "keep_bytes"]

#: The environment variable for the bytes of uncovered actor calls a driver keeps.
KEEP_BYTES_ENV: Final = "DISTA_ACTOR_KEEP_BYTES"
#: Where a driver says why its actor calls wait (WARNING) and that they go on (INFO).
_log: Final = logging.getLogger("dista.driver")


def keep_bytes() -> int:
    """The kept-calls budget: ``DISTA_ACTOR_KEEP_BYTES``, else the core's default (64 MiB)."""
    text = os.environ.get(KEEP_BYTES_ENV, "")
    if not text:
        return dp.DEFAULT_KEEP_BYTES
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{KEEP_BYTES_ENV}={text!r}: give a number of bytes (0 or more)")
    return value


_CREATE: Final = 0
_CALL: Final = 1
_CHECKPOINT: Final = 2
_KILL: Final = 3
_KILL_AFTER_CALLS: Final = 4
_KILL_FORCE: Final = 5


class _Held:
    """A frame for an actor, held back until its refs are read (or one before it is)."""

    __slots__ = ("argument", "every", "id", "inputs", "kind", "oid", "prefix")

    def __init__(
        self,
        kind: int,
        oid: int,
        id_: int,
        argument: Bytes,
        inputs: Sequence[int] = (),
        every: int = 0,
        prefix: bytes = b"",
    ) -> None:
        self.kind = kind
        self.oid = oid  # its own ID (reserved), or the actor's for a kill
        self.id = id_  # the actor's type, or the method
        self.argument = argument
        self.inputs = inputs
        self.every = every
        self.prefix = prefix  # before the packed argument (a by-value class)


class SessionHost(Protocol):
    """What the actors read of the session that holds them, live."""

    @property
    def closed(self) -> str:
        """Why the session closed; empty while it is open."""
        ...

    def check_open(self) -> None:
        """Raise `DistaError` if the session is closed (under its lock)."""
        ...

    def poll(self, oid: int, callback: Callable[[], object]) -> tuple[bool, Any]:
        """(True, its slot) if ``oid`` is read; else register ``callback`` (takes the lock)."""
        ...

    def room_locked(self, nbytes: int) -> threading.Event | None:
        """None if ``nbytes`` more of argument may go now (under the in-flight budget);
        else an event to `wait_room` for (under the lock)."""
        ...

    def wait_room(self, room: threading.Event) -> None:
        """Wait, out of the lock, for answers that make room."""
        ...


class SessionActors:
    """A session's actors: its held-back frames, handles and warnings, under its lock."""

    def __init__(
        self,
        *,
        core: dp.Driver,
        io: SessionIO,
        lock: threading.Lock,
        slots: dict[int, _Slot],
        host: SessionHost,
        on_use: Callable[[], None],
        on_block: Callable[[], AbstractContextManager[object]],
        on_await: Callable[[], AbstractContextManager[object]],
    ) -> None:
        self.core = core
        self.io = io
        self._lock = lock  # the session's: it guards the slots and this object's state alike
        self._slots = slots  # the session's, shared: an actor's and a call's IDs have slots
        self._host = host
        self._on_use = on_use
        self._on_block = on_block
        self._on_await = on_await
        self._held: dict[int, deque[_Held]] = {}  # actor -> frames held back, in order
        self._holds: dict[int, int] = {}  # actor -> handles of ours alive
        self._actor_drops: deque[int] = deque()  # handles gone (from __del__, any thread)
        self._warnings: dict[int, str] = {}  # actor -> its newest warning, not yet shown
        #: Actors the head said wait for their worker to rejoin -> since when (monotonic).
        self._awaiting: dict[int, float] = {}
        self._pinned: dict[int, int] = {}  # ref -> held frames waiting for it
        self._deferred: set[int] = set()  # pinned refs released meanwhile
        self._capabilities: dict[int, bytes] = {}  # held-back creates -> their capability

    # -- the user's side (any thread) ----------------------------------------------------

    def create_actor(
        self,
        type_id: int,
        argument: Bytes,
        inputs: Sequence[int],
        every: int,
        prefix: bytes,
        capability: bytes,
        name: str = "",
    ) -> int:
        """Create an actor (``prefix`` + argument) whose handles carry ``capability``; its
        ID, at once (named ``name``: once the head reserved the name, `ValueError` if it is
        taken)."""
        self._on_use()
        request = 0
        with self._lock:
            self._host.check_open()
            actor = 0
            if name:  # the name goes first: the head refuses the create if it is taken
                actor = self.core.reserve()
                request = self.core.actor_name(name, actor)
                self._slots[request] = _Slot()
            if inputs:
                actor = actor or self.core.reserve()
                self._capabilities[actor] = capability
                self._hold(actor, _Held(_CREATE, actor, type_id, argument, inputs, every, prefix))
            else:
                actor = self.core.create_actor(
                    type_id, prefix + argument, every, actor, capability
                )
            self._slots[actor] = _Slot()
        self.io.schedule_flush()
        if request:
            answer = self.wait_request(request, None)
            if isinstance(answer, str):
                self._forget(actor)
                raise ValueError(answer)
        return actor

    def lookup_actor(self, name: str, timeout: float | None) -> bytes:
        """The head's answer to a look-up of ``name`` (actor ID, type ID, capability);
        `ValueError` if no live actor has that name."""
        self._on_use()
        with self._lock:
            self._host.check_open()
            request = self.core.actor_name(name)
            self._slots[request] = _Slot()
        self.io.schedule_flush()
        answer = self.wait_request(request, timeout)
        if not isinstance(answer, bytes):
            raise ValueError(answer)  # noqa: TRY004 (no actor has that name)
        return answer

    def wait_request(self, oid: int, timeout: float | None) -> bytes | str:
        """Wait for the answer to a request the head keeps no object for: its value, or
        why it failed."""
        if self.io.in_io_thread():
            raise RuntimeError("naming or looking up an actor would block Dista's event loop")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            event = threading.Event()
            ready, slot = self._host.poll(oid, event.set)
            if ready:
                self._forget(oid)
                value = slot.value
                return value if isinstance(value, str) else bytes(value)
            left = None if deadline is None else deadline - time.monotonic()
            with self._on_block():
                if not event.wait(left):
                    self._forget(oid)
                    raise GetTimeoutError(f"the head did not answer within {timeout} s")

    def call_actor(
        self, actor: int, method: int, argument: Bytes, inputs: Sequence[int], capability: bytes
    ) -> int:
        """Call ``actor``'s ``method`` through a handle carrying ``capability``; the ID of
        the call's result, at once."""
        self._on_use()
        nbytes = argument.nbytes if isinstance(argument, memoryview) else len(argument)
        while True:
            with self._lock:
                self._host.check_open()
                self._open(actor, capability)
                if inputs or actor in self._held:
                    # Held back, it keeps nothing in the core yet: it goes when its refs
                    # are read, on the I/O thread, where nothing waits.
                    oid = self.core.reserve()
                    self._hold(actor, _Held(_CALL, oid, method, argument, inputs))
                    self._slots[oid] = _Slot()
                    break
                room = self._host.room_locked(nbytes)
                if room is None:
                    oid = self.core.call_actor(actor, method, argument)
                    self._slots[oid] = _Slot()
                    break
            self._host.wait_room(room)
        self.io.schedule_flush()
        return oid

    def kill_actor(self, actor: int, capability: bytes, force: bool = False) -> None:
        with self._lock:
            self._host.check_open()
            self._open(actor, capability)
            self._kill_locked(actor, force=force)
        self.io.schedule_flush()

    def _open(self, actor: int, capability: bytes) -> None:
        """Before the first call or kill through a handle to another driver's actor, show
        the head its capability (the core sends it once, and again after a resume)."""
        if capability and actor >> dp.ID_BITS != self.core.number:
            self.core.open_actor(actor, capability)

    def _kill_locked(self, actor: int, after_calls: bool = False, force: bool = False) -> None:
        if actor in self._held:
            kind = _KILL_FORCE if force else _KILL_AFTER_CALLS if after_calls else _KILL
            self._held[actor].append(_Held(kind, actor, 0, b""))
        else:
            self.core.kill_actor(actor, after_calls, force)

    def hold_actor(self, actor: int) -> None:
        """A handle of ours to ``actor`` was made (the driver that created it)."""
        with self._lock:
            self._holds[actor] = self._holds.get(actor, 0) + 1

    def drop_actor(self, actor: int) -> None:
        """A handle of ours went away (from ``__del__``: any thread, any time)."""
        self._actor_drops.append(actor)
        self.io.schedule_flush()

    def actor_warning(self, actor: int) -> str | None:
        """The newest warning about ``actor`` not shown yet (a failed checkpoint)."""
        return self._warnings.pop(actor, None)

    def checkpoint_actor(self, actor: int, capability: bytes, timeout: float | None) -> None:
        """Ask for a checkpoint and wait for it; `CheckpointError` says why it failed."""
        if self.io.in_io_thread():
            raise RuntimeError(
                "handle.checkpoint() would block the event loop that runs Dista: use "
                "`await handle.checkpoint_async()`"
            )
        oid = self._ask_checkpoint(actor, capability)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            event = threading.Event()
            ready, slot = self._host.poll(oid, event.set)
            if ready:
                return self._checkpointed(oid, slot)
            left = None if deadline is None else deadline - time.monotonic()
            with self._on_block():
                if not event.wait(left):
                    self._forget(oid)
                    raise GetTimeoutError(
                        f"the checkpoint of actor {actor:#x} was not written within {timeout} s"
                    )

    async def checkpoint_actor_async(
        self, actor: int, capability: bytes, timeout: float | None
    ) -> None:
        oid = self._ask_checkpoint(actor, capability)
        while True:
            latch: Latch[None] = Latch()
            ready, slot = self._host.poll(oid, partial(latch.set, None))
            if ready:
                return self._checkpointed(oid, slot)
            with self._on_await():
                try:
                    await wait_latch(latch, timeout)
                except TimeoutError:
                    self._forget(oid)
                    raise GetTimeoutError(
                        f"the checkpoint of actor {actor:#x} was not written within {timeout} s"
                    ) from None

    def _ask_checkpoint(self, actor: int, capability: bytes) -> int:
        self._on_use()
        with self._lock:
            self._host.check_open()
            self._open(actor, capability)
            if actor in self._held:
                oid = self.core.reserve()
                self._hold(actor, _Held(_CHECKPOINT, oid, 0, b""))
            else:
                oid = self.core.checkpoint_actor(actor)
            self._slots[oid] = _Slot()
        self.io.schedule_flush()
        return oid

    def _checkpointed(self, oid: int, slot: _Slot) -> None:
        self._forget(oid)
        if isinstance(slot.value, str):
            raise CheckpointError(f"the checkpoint could not be written: {slot.value}")

    async def await_actor(self, actor: int) -> None:
        """Once ``actor`` exists; raises why it could not be created, or why it died."""
        while True:
            latch: Latch[None] = Latch()
            ready, slot = self._host.poll(actor, partial(latch.set, None))
            if ready:
                if isinstance(slot.value, str):
                    raise error_from_message(slot.value, actor)
                return
            with self._on_await():
                await wait_latch(latch, None)

    def _forget(self, oid: int) -> None:
        """Drop a slot the head keeps no object for (no release)."""
        with self._lock:
            self._slots.pop(oid, None)

    # -- held-back frames (under the lock) ---------------------------------------------------

    def _hold(self, actor: int, held: _Held) -> None:
        for oid in held.inputs:
            if oid not in self._slots:
                raise ValueError(f"object {oid:#x} is not held by this session")
        queue = self._held.get(actor)
        if queue is None:
            queue = self._held[actor] = deque()
        queue.append(held)
        pinned = self._pinned
        for oid in held.inputs:
            pinned[oid] = pinned.get(oid, 0) + 1
        self._send_held(actor)

    def _send_held(self, actor: int) -> None:
        """Send the frames held back for ``actor`` whose refs are read, in order."""
        queue = self._held[actor]
        core = self.core
        while queue:
            held = queue[0]
            values = self._values_of(actor, held.inputs)
            if values is None:
                return  # a callback calls again once a value is in
            queue.popleft()
            self._unpin(held.inputs)
            if held.kind == _CALL:
                argument = pack_inputs(held.argument, values) if values else held.argument
                core.call_actor(actor, held.id, argument, held.oid)
            elif held.kind == _CREATE:
                argument = held.prefix + pack_inputs(held.argument, values)
                capability = self._capabilities.pop(actor, None)
                core.create_actor(held.id, argument, held.every, held.oid, capability)
            elif held.kind == _CHECKPOINT:
                core.checkpoint_actor(actor, held.oid)
            else:
                core.kill_actor(actor, held.kind == _KILL_AFTER_CALLS, held.kind == _KILL_FORCE)
        del self._held[actor]

    def _values_of(
        self, actor: int, inputs: Sequence[int]
    ) -> list[tuple[int, Bytes | str]] | None:
        """The values (or errors) of ``inputs`` if all are read; else None, with each one
        not read yet asked for (fetched if it lies on a worker) and watched."""
        values: list[tuple[int, Bytes | str]] = []
        missing = False
        for oid in inputs:
            slot = self._slots[oid]
            if slot.state == _VALUE or slot.state == _FAILED:
                assert slot.value is not None
                values.append((oid, slot.value))
                continue
            missing = True
            if slot.state == _LOCATED and not slot.fetching:
                slot.fetching = True
                self.core.fetch(oid)
            slot.callbacks.append(partial(self._input_arrived, actor))
        return None if missing else values

    def _input_arrived(self, actor: int) -> None:
        """A value (or location) one of ``actor``'s held frames waits for came in."""
        with self._lock:
            if actor in self._held and not self._host.closed:
                self._send_held(actor)
        self.io.schedule_flush()

    def _unpin(self, inputs: Sequence[int]) -> None:
        pinned = self._pinned
        for oid in inputs:
            left = pinned[oid] - 1
            if left:
                pinned[oid] = left
                continue
            del pinned[oid]
            if oid in self._deferred:
                self._deferred.discard(oid)
                if self._slots.pop(oid, None) is not None:
                    self.core.release(oid)

    # -- the session's side (under its lock) ------------------------------------------------

    def release_pinned(self, oid: int) -> bool:
        """Whether a release of ``oid`` waits for the held frames that need its value."""
        if oid in self._pinned:
            self._deferred.add(oid)
            return True
        return False

    def drain_drops(self) -> None:
        """Handles that went away: the last of ours kills its actor."""
        drops = self._actor_drops
        while drops:
            actor = drops.popleft()
            left = self._holds.get(actor, 0) - 1
            if left > 0:
                self._holds[actor] = left
                continue
            self._holds.pop(actor, None)
            self._slots.pop(actor, None)
            if not self._host.closed:
                # As Ray ends an actor whose handles are gone: after the calls made to it.
                self._kill_locked(actor, after_calls=True)

    def on_awaits_host(self, d: dp.ActorAwaitsHost) -> Callable[[], None] | None:
        """The head says actor ``d.actor_id`` waits for its worker to rejoin (or no more):
        what to log, once per wait, out of the lock (None: nothing)."""
        actor = f"{d.actor_id:#x}"
        if d.wait_ms:
            if d.actor_id in self._awaiting:
                return None
            self._awaiting[d.actor_id] = time.monotonic()
            return partial(
                _log.warning,
                "dista driver: actor %s waits for its worker to come back after a head "
                "restart, %.1f s at most (the head's recovery grace; then it is restored from "
                "its newest checkpoint on another worker); its calls wait meanwhile. "
                "`dista status` shows it",
                actor,
                d.wait_ms / 1000,
            )
        since = self._awaiting.pop(d.actor_id, None)
        if since is None:
            return None
        waited = time.monotonic() - since
        return partial(
            _log.info, "dista driver: actor %s %s after %.1f s", actor, d.message, waited
        )

    def on_warning(self, decision: dp.ActorWarning) -> None:
        """The head warned about an actor (a failed checkpoint): shown at its next call."""
        self._warnings[decision.actor_id] = decision.message
