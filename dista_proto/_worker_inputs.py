"""A worker's task-afters until their inputs are all there (task-inputs frames).

Each input of a task-inputs frame is inline (its bytes are in the frame), located at this
worker's own object server (its store has it), located at another (fetched from there), or
located at `MADE_HERE`: a result of this worker's own, the task sent ahead of it
(docs/protocol.md, "Extensions: tasks sent ahead"). Such a result comes from the store, or
from the last `RECENT` small results this worker sent (the task may arrive after its input
was made), or is waited for while a task this worker holds makes it. `Inputs` keeps the
tasks still waiting (`Gathering`), by their first result ID, and which input each waits
for; the worker (`dista_proto._worker`) starts, fails or gives back what it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._conventions import MADE_HERE
from ._events import Address, InlineInput, TaskInputs
from .frame import Bytes

__all__ = ["RECENT", "Gathering", "Inputs"]

#: How many of its small results (at most `RECENT_SIZE` bytes) a worker keeps after
#: sending them, for tasks sent ahead of them that arrive after they were made.
RECENT: Final = 64
RECENT_SIZE: Final = 16 << 10


class Gathering:
    """A task-inputs waiting for some of its inputs."""

    __slots__ = ("event", "missing", "values")

    def __init__(self, event: TaskInputs) -> None:
        self.event = event
        self.values: list[Bytes | None] = [None] * len(event.inputs)
        self.missing = 0

    def start_values(self) -> tuple[Bytes, ...]:
        return tuple(v for v in self.values if v is not None)


class Inputs:
    """The tasks of one worker that wait for inputs, and what each waits for."""

    def __init__(
        self, address: Address, store: dict[int, Bytes], fetch: Callable[[int, Address], None]
    ) -> None:
        self._address = address
        self._store = store  # the worker's: what its object server serves
        self._fetch = fetch
        self.gathering: dict[int, Gathering] = {}  # first result ID -> its inputs so far
        self._waiting_for: dict[int, list[tuple[Gathering, int]]] = {}  # input ID -> slots
        self._recent: dict[int, Bytes] = {}

    def gather(self, event: TaskInputs, making: Callable[[int], bool]) -> Gathering | str | None:
        """Start gathering ``event``'s inputs. The job (ready if nothing is ``missing``, else
        kept, its fetches asked); why it fails; or None: an input sent ahead will not be made
        here (``making`` says what the worker's tasks make), so the task goes back."""
        job = Gathering(event)
        # (input, its slot, where to fetch it or None: made here), kept once all is known:
        # a task that fails or goes back leaves nothing waiting.
        waits: list[tuple[int, int, Address | None]] = []
        for index, item in enumerate(event.inputs):
            oid = item.object_id
            if isinstance(item, InlineInput):
                job.values[index] = item.data
                continue
            if item.address == MADE_HERE:
                value = self._store.get(oid)
                job.values[index] = self._recent.get(oid) if value is None else value
                if job.values[index] is None:
                    if not making(oid):
                        return None  # failed, withdrawn, cancelled or never ours
                    waits.append((oid, index, None))
            elif item.address == self._address:
                job.values[index] = self._store.get(oid)
                if job.values[index] is None:
                    return f"input {oid:#x} is not on this worker ({self._address})"
            else:
                waits.append((oid, index, item.address))
        if waits:
            job.missing = len(waits)
            self.gathering[event.object_id] = job
            for oid, index, address in waits:
                self._waiting_for.setdefault(oid, []).append((job, index))
                if address is not None:
                    self._fetch(oid, address)
        return job

    def waits_for(self, oid: int) -> bool:
        return oid in self._waiting_for

    def arrived(self, oid: int, value: Bytes | None) -> list[tuple[Gathering, bool]]:
        """Input ``oid`` is here (``value``), or will not come (None): the jobs waiting for
        it that are now whole (True) or cannot be (False), no longer kept."""
        done = []
        for job, index in self._waiting_for.pop(oid, []):
            first = job.event.object_id
            if self.gathering.get(first) is not job:
                continue  # already failed or given back for another input
            if value is None:
                del self.gathering[first]
                done.append((job, False))
                continue
            job.values[index] = value
            job.missing -= 1
            if job.missing == 0:
                del self.gathering[first]
                done.append((job, True))
        return done

    def sent(self, oid: int, value: Bytes) -> None:
        """Result ``oid`` of ours went to the head inline: a task sent ahead may want it."""
        if len(value) <= RECENT_SIZE:
            recent = self._recent
            recent[oid] = value
            if len(recent) > RECENT:
                del recent[next(iter(recent))]

    def drop(self, first: int) -> bool:
        """Stop gathering for the task whose first result is ``first``; whether it was."""
        return self.gathering.pop(first, None) is not None

    def clear(self) -> None:
        self.gathering.clear()
        self._waiting_for.clear()
