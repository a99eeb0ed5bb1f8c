"""Moving bytes between a binding's streams and a sans-IO core, whatever the event loop.

An `Engine` holds one core (`dista_proto.Core`: a head, a worker, a driver's session or an
observer), maps its link numbers to streams and carries out its decisions: write buffers
(small frames joined into one write, large payloads passed as they lie), open a connection
(the `Loop`'s `dial`), close one, exit (its `exited` latch). A binding gives it streams
(`Stream`: asyncio's transports are ones as they are) and reads each connection into the
place the core offers (`get_buffer`), saying how many bytes arrived (`on_updated`); `Link`
is that reader's side for bindings whose connections call back as asyncio's protocols do.
Nothing here knows a loop but through `Loop`.

One flush: every input to the core (a connection, bytes, a lost link, its timer, and
whatever a host feeds it: a hello, a finished task) is followed by `transmit`, the one place
that takes the core's decisions, carries them out, and re-arms the core's pulled timer at
its `next_deadline` (aioquic's ``transmit``). Decisions are routed by type through one
table: the engine's own I/O ones (write, close, connect, exit), and those each host
registers for its role (`route`: a task to run, a lost head, an answer). The time given to
the core is `_clock.now`: monotonic, as its deadlines and the loop's timers are.

Flow control: every transport's write buffer has a high-water mark (`HIGH_WATER`). When a
peer reads slowly and its buffer passes the mark, the link whose input produced more
writes to it stops being read until the slow peer drains below the low-water mark, so the
memory one slow peer can pin is bounded by the mark plus one read (`READ_SIZE`) of output
per link feeding it, instead of growing with whatever the others send.

Large buffers (an object server's parts: views of the stored value) are not handed to the
transport whole: they go in slices of `SLICE` while its buffer is under the mark, and the
rest waits, as views, in the link's backlog until the transport asks for more
(`resume_writing`). asyncio's transports copy whatever a write doesn't send at once into
their buffer (a 1 GiB object would be copied into 1 GiB of fresh memory); this way at most
about the mark is copied at a time, into memory the transport reuses. uvloop keeps the
views it is given, so it copies nothing either way.

A peer's bad input is the core's business: it closes the link with a reason, and the host
logs one line for it, at WARNING, naming the peer (``dista head: refused peer
127.0.0.1:54321 (link 7): protocol error: ...``), never a traceback.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Final, TypeVar

import dista_proto as dp
from dista_proto.frame import Bytes

from .._clock import now
from .._net.admission import Admission, Throttle
from .._net.contract import Loop, Secure, Stream
from .._net.latch import Latch
from .._net.limits import Limits
from .._net.streams import PEER_LABEL, peer_ip, peer_name, write
from .._tls.config import TLS, PeerIdentity, tls_for
from .._tls.handshake import Handshakes
from .._values.memory import ready
from .._values.shared import SameHost
from .timer import PulledTimer

__all__ = ["CLOSE_GRACE_S", "DIAL_TIMEOUT_S", "Engine"]

#: The starts of the reasons of a core's `Close` that the host logs, one line each: the
#: peer broke the protocol, sat idle past its hello, dripped a frame, or resumed without
#: proving its driver (the line names the certificate).
_LOGGED: Final = ("protocol error", "idle:", "too slow:", dp.RESUME_REFUSED)
#: How long opening a connection the core asks for (`Connect`: an object server) may take.
DIAL_TIMEOUT_S: Final = 10.0
#: How long `Engine.close_all` lets its connections flush and close before aborting them:
#: a peer that stops reading, or never answers TLS's close_notify, must not keep one (and
#: its socket) open after its engine is done, nor leave it to a closed loop.
CLOSE_GRACE_S: Final = 1.0

D = TypeVar("D")


class Engine:
    """The streams of ``core`` on ``loop``; a host (a subclass) feeds the core what only it
    knows and registers how its role's decisions are carried out (`route`). ``exited`` is
    settled with the reason when the core exits, ``drained`` once `close_all` has closed
    every connection."""

    #: Whose certificate this engine shows in TLS (head, worker, driver, observer): its
    #: pair in ``DISTA_TLS_DIR``; "" for one that needs none.
    tls_role: ClassVar[str] = ""
    #: Who this engine is in its log lines ("dista head: ...", logger ``dista.head``); by
    #: default the name of the module defining the subclass (``_head`` gives "head").
    role_name: ClassVar[str] = ""

    def __init__(self, loop: Loop, core: dp.Core) -> None:
        self.loop = loop
        self.core = core
        self.exited: Latch[str] = Latch()
        self.drained: Latch[None] = Latch()
        self._closing_all = False
        name = self.role_name or type(self).__module__.rsplit(".", 1)[-1].strip("_")
        self.name = name
        self.log = logging.getLogger(f"dista.{name}")
        self.transports: dict[int, Stream] = {}
        #: Links whose stream is over its high-water mark (`pause_writing`): read it, the
        #: engine alone changes it.
        self.paused: set[int] = set()
        self._blocked: dict[int, set[int]] = {}  # slow link -> links not read because of it
        self._backlog: dict[int, deque[Bytes]] = {}  # link -> what waits for its transport
        self._close_after: set[int] = set()  # links to close once their backlog is written
        self._dialed: set[int] = set()  # links we connected
        self._refusals = Throttle()  # peers refused for a protocol error
        self.use_tls(tls_for(self.tls_role) if self.tls_role else None)
        #: The caps on incoming connections (`limit`), kept when each is attached.
        self.admission: Admission | None = None
        #: The core's pulled timer, re-armed by `transmit`; stopped once the core exits.
        self._timer = PulledTimer(loop, core.next_deadline, self._on_timer)
        self.exited.add_callback(lambda _: self._timer.cancel())
        #: How each kind of decision is carried out (`route` adds a role's own).
        self._routes = _Routes(
            {
                dp.Write: self._write,
                dp.Close: self._close,
                dp.Connect: self._connect,
                dp.Exit: self._exit,
            }
        )
        self._source = -1  # the link whose input the decisions being carried out came from
        #: This host's mailbox and the memory files it shares (`dista_runtime._values.shared`).
        self.same_host: SameHost | None = None

    # -- the one flush ----------------------------------------------------------------------

    def route(self, kind: type[D], carry_out: Callable[[D], object]) -> None:
        """Carry out the core's ``kind`` decisions with ``carry_out`` (a role's own: a task
        to run, a lost head, an answer)."""
        self._routes[kind] = carry_out

    def transmit(self, source: int = -1) -> None:
        """After every input to the core: carry out what it decided, in order, then keep its
        timer at its next deadline. ``source`` is the link whose bytes were the input: it
        stops being read while a peer it writes to reads too slowly."""
        decisions = self.core.decisions()
        if decisions:
            same_host = self.same_host
            if same_host is not None and same_host.queued:
                same_host.flush()  # the memory files before the mapped frames naming them
            self.act(decisions, source)
        if not self.exited.done():
            self._timer.arm()

    def act(self, decisions: Iterable[dp.Decision], source: int = -1) -> None:
        """Carry out ``decisions`` in order, each by the route of its type."""
        routes = self._routes
        outer, self._source = self._source, source  # a route may feed the core: nested
        for d in decisions:
            routes[type(d)](d)
        self._source = outer

    def _on_timer(self, now_ns: int) -> None:
        self.core.on_timer(now_ns)
        self.transmit()

    # -- the core's inputs (a host adds what only it knows around them) ---------------------

    def accept(self) -> int:
        """A connection came in (`Loop.listen`): the core's link number for it (passed
        through `inbound`, so that it counts against the caps)."""
        link = self.inbound(self.core.connection_made(now()))
        self.transmit()  # its hello deadline may come first
        return link

    def greeted(self, link: int) -> bool:
        """Whether ``link`` said hello: one that has not may be closed for a newer one."""
        return True

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        """Where to read ``link``'s next bytes (the core's `get_buffer`)."""
        return ready(self.core.get_buffer(link, sizehint))

    def on_updated(self, link: int, nbytes: int) -> None:
        """``nbytes`` were read into the view `get_buffer` gave for ``link``."""
        self.core.buffer_updated(link, nbytes, now())
        self.transmit(link)

    def lost(self, link: int) -> None:
        """``link`` ended (or was refused before a byte was read): the core forgets it."""
        self.core.connection_lost(link, now())
        self.transmit()

    def opened(self, link: int) -> None:
        """A connection asked for with `Connect` is up: a core that dials (a worker's or a
        driver's fetches) is told by its host."""
        self.transmit()

    # -- the loop's side --------------------------------------------------------------------

    def connect(self, link: int, address: dp.Address) -> None:
        """Open a connection for ``link`` to ``address`` (the core's `Connect`)."""
        self.dial(link, address.host, address.port, DIAL_TIMEOUT_S)

    def dialed(self, link: int, error: str) -> None:
        """`Loop.dial` for ``link`` ended: attached (``error`` empty), or failed."""
        if error:
            self.lost(link)
        else:
            self.opened(link)

    def exit(self, reason: str) -> None:
        """The core is done (`Exit`)."""
        self.exited.set(reason)

    # -- streams ----------------------------------------------------------------------------

    def limit(self, limits: Limits) -> None:
        """Keep ``limits`` on the connections `accept` takes (`dista_runtime._net.admission`)."""
        self.admission = Admission(limits, self.greeted, self.log, self.name, self.loop.call_later)
        if self.handshakes is not None:
            self.handshakes.bound(limits, self.loop.call_later)

    def inbound(self, link: int) -> int:
        """``link`` came in through a listener: it counts against the caps."""
        if self.admission is not None:
            self.admission.expect(link)
        return link

    def attach(self, link: int, transport: Stream) -> None:
        if self.exited.done() or self._closing_all:
            # A peer that connected as the role exited (a worker started late, joining a
            # head that is stopping): nobody will read it, and nothing was written to it.
            transport.abort()
            return
        if self.admission is not None and not self.admission.admit(link, transport):
            self.lost(link)  # refused before a byte was read: the core forgets it
            return
        self.transports[link] = transport
        self.attached(link, peer_ip(transport.get_extra_info("peername")))

    def attached(self, link: int, host: str) -> None:
        """``link`` is attached; its peer connects from ``host`` (the cores grant fetches by
        host: `Head.peer`, `Worker.peer`)."""

    def detach(self, link: int) -> None:
        if self.admission is not None:
            self.admission.release(link)
        self._dialed.discard(link)
        if self.transports.pop(link, None) is None:
            return
        self._backlog.pop(link, None)
        self._close_after.discard(link)
        self.resume_writing(link)
        self.lost(link)
        if self._closing_all and not self.transports:
            self.drained.set(None)

    def pause_writing(self, link: int) -> None:
        """``link``'s stream passed its high-water mark: links whose input writes more to
        it stop being read until it drains (`resume_writing`)."""
        self.paused.add(link)

    def resume_writing(self, link: int) -> None:
        """``link``'s stream drained below its low-water mark: write what waits for it, and
        read again the links that were waiting for it."""
        if link in self._backlog and self._pump(link):
            return  # more waits: the transport is over the mark again
        self.paused.discard(link)
        for reader in self._blocked.pop(link, ()):
            transport = self.transports.get(reader)
            if transport is not None and not transport.is_closing():
                transport.resume_reading()
                self.reading_paused(reader, False)

    def reading_paused(self, link: int, paused: bool) -> None:
        """``link`` stops (or starts again) being read for a slow peer (a head's core
        does not count that time against the link's rate floor)."""

    def blocked(self, link: int) -> bool:
        """Whether ``link`` is not read because a peer its input writes to reads slowly."""
        return any(link in readers for readers in self._blocked.values())

    def closing(self, link: int, reason: str) -> None:
        """The core closes ``link`` for ``reason`` (a role may act on it: the head ends a
        force-stopped worker's process)."""

    # -- the I/O decisions -------------------------------------------------------------------

    def _write(self, d: dp.Write) -> None:
        link = d.link
        transport = self.transports.get(link)
        if transport is None or transport.is_closing():
            return
        backlog = self._backlog.get(link)
        if backlog is not None:
            backlog.extend(d.buffers)
        else:
            rest = write(transport, d.buffers)
            if rest:
                self._backlog[link] = rest
                self.paused.add(link)
        if link in self.paused and self._source >= 0:
            self._block(self._source, link)

    def _close(self, d: dp.Close) -> None:
        self.closing(d.link, d.reason)
        transport = self.transports.get(d.link)
        if transport is not None:
            if d.reason.startswith(_LOGGED):
                self.refused(d.link, transport, d.reason)
            if d.link in self._backlog:
                self._close_after.add(d.link)
            else:
                transport.close()  # flushes what is buffered first

    def _connect(self, d: dp.Connect) -> None:
        self.connect(d.link, d.address)

    def _exit(self, d: dp.Exit) -> None:
        self.exit(d.reason)

    # -- TLS (a layer below the connections: `dista_runtime._tls.handshake`) ------------------

    def use_tls(self, tls: TLS | None) -> None:
        """Mutual TLS for this engine's connections (`dista_runtime._tls.config`: from
        DISTA_TLS_*, which --tls-dir sets), or None for plain TCP."""
        self.tls = tls
        self.handshakes = (
            None
            if tls is None
            else Handshakes(
                tls, self.name, self.log, self.transports.__contains__, self.authenticated
            )
        )
        admission = getattr(self, "admission", None)  # None while __init__ runs
        if self.handshakes is not None and admission is not None:
            self.handshakes.bound(admission.limits, self.loop.call_later)

    def secure(self, dialing: bool) -> Secure | None:
        """What `Loop.dial` (``dialing``) or `Loop.listen` needs for TLS, or None."""
        if self.handshakes is None:
            return None
        return self.handshakes.dialing if dialing else self.handshakes.accepting

    def dial(self, link: int, host: str, port: int, timeout: float) -> None:
        """Connect ``link`` to ``host:port`` (`Loop.dial`); in TLS, its peer must show the
        role expected there (the head for the head link, else a worker)."""
        self._dialed.add(link)
        self.loop.dial(self, link, host, port, timeout, self.secure(dialing=True))

    def authenticated(self, link: int, roles: frozenset[str], identity: PeerIdentity) -> bool:
        """Whether the peer of ``link``, which came in and showed a certificate granting
        ``roles`` (``identity``: which certificate), may stay (its core says; a role that
        listens for nobody refuses)."""
        return False

    @staticmethod
    def _peer(transport: Any) -> str:
        label: str = transport.get_extra_info(PEER_LABEL) or peer_name(
            transport.get_extra_info("peername")
        )
        return label

    def refused(self, link: int, transport: Stream, reason: str) -> None:
        """The core closes ``link`` for the peer's bad input: one line, no traceback, and
        at most one a second (a fuzzer's million bad frames wrote megabytes of log)."""
        self._refusals.note(
            self.log,
            f"dista {self.name}: refused peer %s (link %d): %s",
            self._peer(transport),
            link,
            reason,
        )

    def _pump(self, link: int) -> bool:
        """Write more of ``link``'s backlog; whether some still waits."""
        transport = self.transports.get(link)
        backlog = self._backlog.pop(link)
        if transport is None or transport.is_closing():
            return False
        rest = write(transport, list(backlog))
        if rest:
            self._backlog[link] = rest
            return True
        if link in self._close_after:
            self._close_after.discard(link)
            transport.close()
        return False

    def _block(self, reader: int, slow: int) -> None:
        transport = self.transports.get(reader)
        if transport is None or transport.is_closing():
            return
        readers = self._blocked.setdefault(slow, set())
        if reader not in readers:
            readers.add(reader)
            transport.pause_reading()
            self.reading_paused(reader, True)

    def close_all(self) -> None:
        """Close every connection, each once what it has buffered is sent; abort what is
        still open `CLOSE_GRACE_S` later. ``drained`` is settled when none is left: whoever
        ends the loop waits for it, or a connection still closing is left to a closed loop
        (its socket then leaks until collected, with a ResourceWarning)."""
        first = not self._closing_all
        self._closing_all = True
        for transport in list(self.transports.values()):
            transport.close()
        if not self.transports:
            self.drained.set(None)  # a second settle is ignored
        elif first:
            self.loop.call_later(CLOSE_GRACE_S, self._abort_left)

    def _abort_left(self) -> None:
        for transport in list(self.transports.values()):
            transport.abort()


class _Routes(dict[type[Any], Callable[[Any], object]]):
    """How each kind of decision is carried out; a kind without a route is a bug."""

    def __missing__(self, kind: type[Any]) -> Callable[[Any], object]:
        raise TypeError(f"no route for the core's {kind.__name__} decisions (Engine.route)")
