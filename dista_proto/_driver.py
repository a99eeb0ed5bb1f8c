"""The driver: submits tasks under its own number and routes answers to its objects.

Theory of operation
-------------------
Link 0 is the head. `start` sends hello; the head's welcome gives the driver its number,
and from then on every object ID it mints is ``number << 40 | n`` with ``n`` counting from
1, so IDs never collide between drivers and stay valid across a head restart. A task-many
takes ``results`` consecutive IDs. Answers from the head become decisions for the runtime:
`ObjectValue` (inline), `ObjectLocated` (on a worker: `fetch` brings it, in parts past one
frame) and `ObjectFailed`. A fetch that fails where the object was asks the head where it is
now (a claim, outside a resume): adopted off a draining worker that has since left, it is
fetched from its new place, and fails only if the head still places it where it was. The
driver never blocks; `submit` and friends queue frames; `inflight_bytes` is the argument
bytes kept for unfinished work (the runtime's backpressure). Actor calls are kept for a new
head by its `KeptCalls` (`_driver_actors`). Head frames are routed by type (`_on_head`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from . import frame as F
from ._conventions import (
    CANCEL_FORCE,
    ERROR_WARNING,
    HEAD_LINK,
    HELLO_SECRET,
    ID_BITS,
    ID_MASK,
    KILL_AFTER_CALLS,
    KILL_FORCE,
    MAX_RESULTS,
    STATS_NO_REPLY,
    awaited_ms,
)
from ._credentials import fetch_token
from ._decisions import (
    Decision,
    HeadLost,
    ObjectFailed,
    ObjectLocated,
    ObjectValue,
    Refused,
    StatsReceived,
    TimelineReceived,
    Welcomed,
)
from ._driver_actors import KeptCalls
from ._errors import LocalProtocolError
from ._events import (
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorLookup,
    ActorName,
    ActorOpen,
    Address,
    Cancel,
    Checkpoint,
    Claim,
    Covered,
    Error,
    Event,
    Hello,
    Located,
    Release,
    Result,
    Resume,
    Resumed,
    Stats,
    Task,
    TaskAfter,
    TaskMany,
    Timeline,
    Welcome,
)
from ._fetcher import Fetcher
from ._ledger import Ledger
from ._links import Links
from ._mapping import Mapping
from ._roles import Role
from ._telling import Telling
from .frame import Bytes

__all__ = ["DEFAULT_KEEP_BYTES", "Driver"]

_ID_LIMIT: Final = ID_MASK + 1
#: The bytes of uncovered actor calls a driver keeps before it asks for a checkpoint.
DEFAULT_KEEP_BYTES: Final = 64 << 20


class Driver:
    def __init__(
        self,
        *,
        registry_hash: int,
        role: Role = Role.DRIVER,
        part: int = F.PART_SIZE,
        allocate: Callable[[int], bytearray | memoryview] = bytearray,
        keep_bytes: int = DEFAULT_KEEP_BYTES,
        keepalive_ns: int = 0,
        ask_secret: bool = True,
        mapping: Mapping | None = None,
        task_names: Iterable[int] | None = None,
    ) -> None:
        if role not in (Role.DRIVER, Role.CLIENT):
            raise ValueError(f"a Driver is a driver or a client, not {role.name.lower()}")
        self.role: Final = role
        self.registry_hash = registry_hash
        self.number: int = 0
        self.epoch: int = 0
        #: Once welcomed, a `STATS_NO_REPLY` keepalive this often (0: none), against idle-outs.
        self.keepalive_ns = keepalive_ns
        self._keepalive_at = 0
        #: Ask the head for a secret (`HELLO_SECRET`): it proves our resumes, and the fetch
        #: token drawn from it our fetches. False speaks only the page.
        self.ask_secret = ask_secret
        #: Our welcome's secret (b"" from a head giving none), kept for our resumes.
        self.secret: bytes = b""
        self._next = 1
        self._links = Links()
        #: What it says of itself after each hello: task names, labels; and vitals.
        self.telling: Final = Telling(self._links, task_names)
        self._fetcher = Fetcher(self._links, part, allocate, mapping)
        self._located: dict[int, Address] = {}
        self.closed_reason: str = ""
        #: What a new head needs to hear to resume this driver (`_ledger`).
        self._ledger = Ledger()
        #: Actor calls kept for it, and the checkpoint asks (`_driver_actors`).
        self._calls = KeptCalls(keep_bytes, self._links.queue)
        self._fetching: dict[int, Address] = {}  # object -> where we fetch it from
        #: Objects whose fetch failed where they were, asked of the head again (a claim):
        #: object -> (where the fetch failed, why).
        self._relocating: dict[int, tuple[Address, str]] = {}
        self._requests = [0, 0]  # stats and timeline requests not answered
        #: Whether the head link is up (False from a lost head until `start` again).
        self.connected_to_head: bool = False
        self._resuming = False
        self._head_epoch = 0  # the epoch of the head that last welcomed us
        #: Times this driver resumed after losing its head (answers after the first are
        #: dropped from then on: a new head may run a task again).
        self.resumes: int = 0
        #: The head's frames by type -> their handler (a frame of another kind is ignored).
        self._on_head: Final[dict[type[Event], Callable[[Any], None]]] = {
            Result: self._on_result,
            Located: self._on_located,
            Error: self._on_error,
            Welcome: self._on_welcome,
            Covered: self._on_covered,
            Stats: self._on_stats,
            Timeline: self._on_timeline,
        }

    @property
    def keep_bytes(self) -> int:
        """The bytes of uncovered actor calls kept before a checkpoint is asked for."""
        return self._calls.keep_bytes

    @keep_bytes.setter
    def keep_bytes(self, value: int) -> None:
        self._calls.keep_bytes = value

    @property
    def kept_bytes(self) -> int:
        """The bytes (`kept_size`) of the actor calls kept now, not yet covered."""
        return self._calls.kept_bytes

    @property
    def inflight_bytes(self) -> int:
        """Argument bytes kept for unfinished tasks and unanswered actor calls: what may
        still wait to be written, and what a resume sends again (`Ledger`)."""
        return self._ledger.inflight_bytes

    @property
    def ready(self) -> bool:
        """Welcomed: the driver has a number and may submit."""
        return self.number != 0

    # -- the binding's side -------------------------------------------------------------------

    def start(self, now: int, resume: Resume | None = None) -> None:
        """The connection to the head is up: say hello. A driver the head numbered before
        resumes under its number (a client, which does not resume, is numbered anew)."""
        if resume is None and self.number and self.role == Role.DRIVER:
            resume = Resume(self.number, self.epoch, self.secret)
        if self.role == Role.CLIENT and resume is None:
            self.number = 0
            self.secret = self._fetcher.token = b""  # numbered anew: a new secret
        self._resuming = resume is not None
        self.connected_to_head = True
        self._links.open(self.role, HEAD_LINK)
        mark = HELLO_SECRET if self.ask_secret or (resume is not None and resume.secret) else 0
        hello = Hello(int(self.role), self.registry_hash, None, resume, mark)
        self._links.send(HEAD_LINK, hello)
        self.telling.hello()

    def connection_made(self, now: int) -> int:
        """A peer connected to us: a driver listens for nobody (it dials the head and the
        object servers it fetches from), so this is its caller's mistake."""
        raise LocalProtocolError("a driver takes no incoming connections: it only dials")

    def connected(self, link: int, now: int) -> None:
        self._links.connected(link)

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        events, error = self._links.receive(link, data)
        self._received(link, events, error, now)

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes (`Connection.get_buffer`)."""
        return self._links.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """`receive_data` for ``nbytes`` read into the view `get_buffer` gave."""
        events, error = self._links.buffer_updated(link, nbytes)
        self._received(link, events, error, now)

    def _received(self, link: int, events: list[Event], error: str | None, now: int) -> None:
        if link == HEAD_LINK:
            if not self._keepalive_at and self.keepalive_ns:
                self._keepalive_at = now + self.keepalive_ns
            handlers = self._on_head
            for event in events:
                handler = handlers.get(type(event))
                if handler is not None:
                    handler(event)
        else:
            for oid, value, why in self._fetcher.receive(link, events):
                self._fetched(oid, value, why)
        if error is not None:
            self._links.close(link, f"protocol error: {error}")
            self.connection_lost(link, now)

    def connection_lost(self, link: int, now: int) -> None:
        self._links.forget(link)
        if link == HEAD_LINK:
            self.connected_to_head = False
            why = "the head connection was lost"
            if self.number and not self.closed_reason and self.role == Role.DRIVER:
                # What it still needs is in the ledger: a new head hears it on `start`.
                self._links.queue(HeadLost(why))
            else:
                self.closed_reason = self.closed_reason or why
        else:
            for oid, value, why in self._fetcher.lost(link, "connection lost"):
                self._fetched(oid, value, why)

    def decisions(self) -> list[Decision]:
        for oid in self._ledger.take_releases():
            self._send(Release(oid))  # held back until the task taking it was answered
        return self._links.decisions()

    def _send(self, event: Event) -> None:
        """To the head, unless it is away or we wait for its welcome back: then what we
        send is in the ledger (or counted), and goes with the resume, in order."""
        if not self._resuming:
            self._links.send(HEAD_LINK, event)

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do: the next keepalive, if any."""
        return self._keepalive_at or None

    def on_timer(self, now: int) -> None:
        """Time passed: a keepalive to the head when one is due (sent whatever else went:
        a 21-byte frame each interval costs less than knowing what was sent when)."""
        if self._keepalive_at and now >= self._keepalive_at:
            self._keepalive_at = now + self.keepalive_ns
            if self.connected_to_head:
                self._send(Stats(None, STATS_NO_REPLY))

    # -- submitting ----------------------------------------------------------------------------

    def _mint(self, count: int = 1) -> int:
        if not self.number:
            raise LocalProtocolError("the head has not welcomed this driver yet: wait for it")
        if count > MAX_RESULTS:
            raise LocalProtocolError(f"a task has at most {MAX_RESULTS} results, not {count}")
        n = self._next
        if n + count > _ID_LIMIT:
            raise LocalProtocolError(f"driver {self.number} has used up its object IDs")
        self._next = n + count
        return self.number << ID_BITS | n

    def submit(self, task_id: int, argument: Bytes) -> int:
        """Queue a task; the object ID of its result."""
        oid = self._mint()
        task = Task(oid, task_id, argument)
        self._ledger.submitted(task, 1)
        self._send(task)
        return oid

    def submit_many(self, task_id: int, argument: Bytes, results: int) -> int:
        """Queue a task-many; its results are the returned ID and the ``results - 1`` after."""
        oid = self._mint(results)
        task = TaskMany(oid, task_id, results, argument)
        self._ledger.submitted(task, results)
        self._send(task)
        return oid

    def submit_after(
        self,
        task_id: int,
        inputs: Sequence[int],
        *,
        gather: bool = False,
        value: Bytes | None = None,
        results: int | None = None,
    ) -> int:
        """Queue a task whose argument is built from other objects (see task-after)."""
        oid = self._mint(results or 1)
        event = TaskAfter(oid, task_id, tuple(inputs), gather, value, results)
        self._ledger.submitted(event, results or 1)
        self._send(event)
        return oid

    def release(self, oid: int) -> None:
        self._located.pop(oid, None)
        self._relocating.pop(oid, None)
        if not self._ledger.released(oid):
            self._send(Release(oid))

    def cancel(self, oid: int, force: bool = False) -> None:
        """Fail ``oid``'s task with "cancelled"; with ``force`` also end the worker running
        it (Dista's `CANCEL_FORCE` mark)."""
        self._ledger.cancel(oid)
        if not self.connected_to_head or self._resuming:
            # The head is away and never sees this: fail it here (a resume says so).
            self._fail_cancelled()
            return
        self._send(Cancel(oid, CANCEL_FORCE if force else 0))

    def _fail_cancelled(self) -> None:
        """Fail the unanswered results of the tasks we cancelled (not sent again)."""
        for oid in self._ledger.cancelled():
            if self._ledger.answered(oid, Error(oid, "cancelled")):
                self._links.queue(ObjectFailed(oid, "cancelled"))

    # -- actors --------------------------------------------------------------------------------

    def reserve(self) -> int:
        """An object ID for a frame sent later (`create_actor`, `call_actor` and
        `checkpoint_actor` take one: a caller holding a call back until its refs are read
        gives its ref out at once)."""
        return self._mint()

    def create_actor(
        self,
        type_id: int,
        argument: Bytes,
        checkpoint_every: int = 0,
        actor: int = 0,
        capability: bytes | None = None,
    ) -> int:
        """Queue an actor-create; the actor's ID (``actor`` if given: from `reserve`). Its
        answer comes as an `ObjectValue` (an empty one: created) or `ObjectFailed` (the
        constructor's error, or it died later). ``capability`` (`ACTOR_CAPABILITY_SIZE`
        random bytes, drawn by the caller) goes to the head in actor-open right after: a
        holder of a handle carrying it may then call and kill the actor; without one only
        this driver may."""
        actor = actor or self._mint()
        self._calls.created(actor)
        create = ActorCreate(actor, type_id, argument, checkpoint_every)
        self._ledger.created(create)
        self._send(create)
        if capability is not None:
            self.open_actor(actor, capability)
        return actor

    def open_actor(self, actor_id: int, capability: bytes) -> None:
        """Show the head ``actor_id``'s capability (from a handle), once, before calling or
        killing an actor another driver made; sent again on a resume."""
        if self._ledger.opened(actor_id, capability):
            self._send(ActorOpen(actor_id, capability))

    def actor_name(self, name: str, actor_id: int = 0) -> int:
        """Name actor ``actor_id`` (from `reserve`, before `create_actor`), or look ``name``
        up (no ``actor_id``): the ID of the request the head answers (`_head_actor_names`)."""
        request = self._mint()
        event = ActorName(actor_id, request, name) if actor_id else ActorLookup(request, name)
        self._ledger.asked_name(event)
        self._send(event)
        return request

    def call_actor(self, actor_id: int, method_id: int, argument: Bytes, oid: int = 0) -> int:
        """Queue a call of ``actor_id``'s method; the object ID of its result (``oid`` if
        given: from `reserve`)."""
        oid = oid or self._mint()
        call = ActorCall(oid, method_id, actor_id, argument)
        self._ledger.called(oid, argument)
        self._send(call)
        calls = self._calls
        if calls.keep(call):
            # Over the keep budget: a checkpoint of this actor lets its calls go.
            if not calls.asking(actor_id):
                ask = self._mint()
                calls.asked(ask, actor_id, own=True)
                self._send(Checkpoint(ask, 0, actor_id))
            calls.trim(actor_id)
        return oid

    def checkpoint_actor(self, actor_id: int, oid: int = 0) -> int:
        """Ask for a checkpoint of ``actor_id`` now; the checkpoint's ID (``oid`` if given),
        whose answer comes as an `ObjectValue` (empty: written) or `ObjectFailed` (why not)."""
        oid = oid or self._mint()
        self._calls.asked(oid, actor_id)
        self._send(Checkpoint(oid, 0, actor_id))
        return oid

    def kill_actor(self, actor_id: int, after_calls: bool = False, force: bool = False) -> None:
        """Destroy ``actor_id``: calls not yet run fail; with ``after_calls`` (its last
        handle went) the calls already made run first (`KILL_AFTER_CALLS`); with ``force``
        its worker process ends too (`KILL_FORCE`)."""
        self._calls.ended(actor_id, self._ledger.pending)
        mark = KILL_FORCE if force else KILL_AFTER_CALLS if after_calls else 0
        kill = ActorKill(actor_id, mark)
        self._ledger.ended(actor_id, kill)
        self._send(kill)

    def leave(self) -> None:
        """The driver is done (a clean shutdown): cancel its unfinished tasks, release what
        it holds and end its actors now. The head cannot tell a driver that left from one
        whose link dropped (it keeps those for a resume), so a driver that knows says so."""
        if not self.connected_to_head or self._resuming or self.role != Role.DRIVER:
            return
        tasks, held, actors = self._ledger.leaving()
        for actor in actors:  # (a named one others may hold: it lets go of it)
            self._send(ActorKill(actor, KILL_AFTER_CALLS if self._ledger.named(actor) else 0))
        for oid in tasks:
            self._send(Cancel(oid))
        for oid in held:
            self._send(Release(oid))

    def kept(self, actor_id: int) -> int:
        """How many calls to ``actor_id`` this driver keeps (not yet covered)."""
        return self._calls.kept(actor_id)

    def request_stats(self) -> None:
        self._requests[0] += 1
        self._send(Stats())

    def request_timeline(self) -> None:
        self._requests[1] += 1
        self._send(Timeline())

    def fetch(self, oid: int) -> None:
        """Bring a located object's value from its worker: an `ObjectValue` or failure."""
        address = self._located.get(oid)
        if address is None:
            self._links.queue(ObjectFailed(oid, f"object {oid:#x} is not located on a worker"))
            return
        self._fetching[oid] = address
        self._fetcher.request(oid, address)

    # -- resuming ------------------------------------------------------------------------------

    def _resume(self, same_head: bool) -> None:
        """Welcomed back under our number: send what we still need, in order, then resumed
        (``same_head``: by the head we last spoke to, which still has what it had)."""
        self._fail_cancelled()
        calls, asks = self._calls.resend(self._ledger.pending)
        frames, lost = self._ledger.frames(calls, asks, same_head, self._calls.positions)
        send = self._send
        for event in frames:
            send(event)
        for _ in range(self._requests[0]):
            send(Stats())
        for _ in range(self._requests[1]):
            send(Timeline())
        send(Resumed())
        for oid in lost:
            why = (
                f"actor call {oid:#x} ran, but its answer was lost with the head that "
                "restarted; the actor's checkpoint includes the call, so it is not run twice"
            )
            self._links.queue(ObjectFailed(oid, why))

    @property
    def needed(self) -> int:
        """Objects this driver still needs (what a resume sends again)."""
        return len(self._ledger)

    # -- answers -------------------------------------------------------------------------------

    def _on_result(self, event: Result) -> None:
        oid = event.object_id
        heard = self._calls.result(oid, event.position)
        if heard is None:
            if self._ledger.answered(oid, event) is not True and self.resumes:
                return  # answered before (a task the new head ran again), or released
        elif not heard:
            return
        self._links.queue(ObjectValue(oid, event.value))

    def _on_located(self, event: Located) -> None:
        oid = event.object_id
        self._calls.answered(oid, event.position)
        first = self._ledger.answered(oid, event.address)
        if first is None:
            # Released: where it lies is nobody's business (an answer to what a resume
            # sent before the release, or a move off a draining worker that crossed it).
            return
        if first is not False or oid in self._located:
            self._located[oid] = event.address
        relocating = self._relocating.pop(oid, None)
        if relocating is not None and oid in self._located:
            if relocating[0] == event.address:
                self._links.queue(ObjectFailed(oid, relocating[1]))  # still there
            else:
                self._fetching[oid] = event.address
                self._fetcher.request(oid, event.address)
            return
        if first is not False:  # else it moved: later fetches go to the new place
            self._links.queue(ObjectLocated(oid, event.address))

    def _on_error(self, event: Error) -> None:
        queue = self._links.queue
        oid = event.object_id
        if oid == 0:
            self.closed_reason = f"the head refused or dropped us: {event.message}"
            queue(Refused(event.message))
            return
        if self._relocating.pop(oid, None) is not None:
            self._located.pop(oid, None)  # asked where it is now: it is lost
            queue(ObjectFailed(oid, event.message))
            return
        heard = self._calls.error(oid, event.message, event.mark, self._ledger.pending)
        if event.mark != ERROR_WARNING and awaited_ms(event.mark) is None:
            self._ledger.confirmed(oid)  # (if it names an actor this driver killed)
        if heard is None:
            if self._ledger.answered(oid, event) is not True and self.resumes:
                return  # answered before a head restart, and now again; or released
        elif not heard:
            return
        else:
            self._ledger.ended(oid)  # an actor that is gone is not created again
        self._located.pop(oid, None)
        queue(ObjectFailed(oid, event.message))

    def _on_welcome(self, event: Welcome) -> None:
        queue = self._links.queue
        if event.secret:
            # Our fetches show the token drawn from it: the head grants by token, not host.
            self.secret = event.secret
            self._fetcher.token = fetch_token(event.secret)
        if self._resuming:
            self._resuming = False
            if event.number != self.number:
                why = f"the head gave number {event.number}, not our {self.number}"
                self.closed_reason = f"cannot resume: {why}"
                self._links.close(HEAD_LINK, self.closed_reason)
                queue(Refused(self.closed_reason))
                return
            self.resumes += 1
            same_head = event.epoch == self._head_epoch
            self._head_epoch = event.epoch
            queue(Welcomed(event.number, event.epoch))
            self._resume(same_head)
            return
        self.number, self.epoch = event.number, event.epoch
        self._head_epoch = event.epoch
        queue(Welcomed(event.number, event.epoch))

    def _on_covered(self, event: Covered) -> None:
        self._calls.covered(event.object_id, event.newest, self._ledger.pending)

    def _on_stats(self, event: Stats) -> None:
        # Not a request (a head sends none), and asked for: a head that knows only the page
        # answers keepalives too, and those replies are dropped.
        if event.counts is not None and self._requests[0] > 0:
            self._requests[0] -= 1
            self._links.queue(StatsReceived(event.counts))

    def _on_timeline(self, event: Timeline) -> None:
        if event.records is not None:
            self._requests[1] = max(self._requests[1] - 1, 0)
            self._links.queue(TimelineReceived(event.records))

    def _fetched(self, oid: int, value: Bytes | None, why: str) -> None:
        source = self._fetching.pop(oid, None)
        if value is None:
            moved = self._located.get(oid)
            if moved is not None and source is not None and moved != source:
                # It moved while we fetched (adopted off a draining worker): there now.
                self._fetching[oid] = moved
                self._fetcher.request(oid, moved)
                return
            if moved is not None and source is not None and oid not in self._relocating:
                # It may have moved with the news still on its way (a drained worker that
                # left): ask the head where it is now (a resume asks for every located
                # object anyway), and fail only if it is still there.
                self._relocating[oid] = (source, why)
                if self.connected_to_head and not self._resuming:
                    self._links.send(HEAD_LINK, Claim(oid))
                return
            self._relocating.pop(oid, None)
            self._links.queue(ObjectFailed(oid, why))
        else:
            self._links.queue(ObjectValue(oid, value))
