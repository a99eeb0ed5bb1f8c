"""What a binding implements: the whole contract between the runtime and one event loop.

Everything Dista does on a loop (carrying out a core's decisions, a worker's tasks, joining
a cluster, a local cluster's head) is written once in the runtime against these types; a
binding (asyncio, anyio on asyncio or trio, gevent) says each in its loop's words:

- `Backend`: what the runtime asks of a binding package, whose ``backend_class`` names it
  (as anyio's backends do): a role's main (`Backend.run`), a loop for blocking callers
  (`Backend.background`), a wait for a `Latch` on its loop (`Backend.wait`), joining a
  cluster from user code (`Backend.connect`), and its `Loop` class (`Backend.loop_type`).
  `dista_runtime.loops` loads it by loop name and checks it by type.
- `Loop`: one event loop as the runtime drives it: calls (soon, from any thread, later),
  coroutines (a worker's ``async def`` tasks), and the network (`Loop.listen`,
  `Loop.dial`).
- `Connections`: what a binding reads each connection into and reports to (an engine), in
  calls only: the binding never touches the engine's state. Write pressure is two calls
  (`Connections.pause_writing`, `Connections.resume_writing`).
- `Stream`: one connection as the engine writes it (asyncio's transports as they are).
- `Secure`: mutual TLS below the connections, handed to `Loop.listen` and `Loop.dial` when
  the engine has it: the context to wrap with, and whom to tell when a handshake ends.
  TLS is never part of `Connections`: a connection reaches the engine once it is secured.
"""

from __future__ import annotations

import ssl
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, ClassVar, Protocol, TypeAlias, TypeVar

from .latch import Latch

__all__ = [
    "AsyncBackend",
    "Background",
    "Backend",
    "Connections",
    "Listener",
    "Loop",
    "Secure",
    "Start",
    "Stop",
    "Stream",
    "TaskHandle",
    "Timer",
    "Tls",
]

T = TypeVar("T")


class Timer(Protocol):
    """A `Loop.call_later` call that has not run yet (asyncio's `TimerHandle` is one)."""

    def cancel(self) -> object: ...


class TaskHandle(Protocol):
    """A coroutine the loop runs (asyncio's `Task` is one): it can be cancelled."""

    def cancel(self) -> object: ...

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None: ...


class Listener(Protocol):
    """A listening socket a binding serves (`Loop.listen`)."""

    #: Where it listens: ``(host, port)``, or ``("unix:PATH", 0)``.
    address: tuple[str, int]

    def close(self) -> None: ...


class Stream(Protocol):
    """One connection as the engine uses it (asyncio's transports are streams as they are)."""

    def write(self, data: Any) -> None: ...

    def get_write_buffer_size(self) -> int: ...

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def is_closing(self) -> bool: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


class Connections(Protocol):
    """What a binding's connections are read into and report to (an engine)."""

    def accept(self) -> int:
        """A connection came in: its link number."""
        ...

    def attach(self, link: int, stream: Stream) -> None:
        """``link`` is carried by ``stream``."""
        ...

    def detach(self, link: int) -> None:
        """``link``'s connection ended."""
        ...

    def dialed(self, link: int, error: str) -> None:
        """`Loop.dial` for ``link`` ended: attached (``error`` empty), or failed."""
        ...

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        """Where ``link``'s next bytes are read to."""
        ...

    def on_updated(self, link: int, nbytes: int) -> None:
        """``nbytes`` were read into the view `get_buffer` gave."""
        ...

    def pause_writing(self, link: int) -> None:
        """``link``'s stream passed its high-water mark: the links feeding it wait."""
        ...

    def resume_writing(self, link: int) -> None:
        """``link``'s stream drained below its low-water mark: write to it again."""
        ...


class Secure(Protocol):
    """Mutual TLS for the connections of one `Loop.listen` or `Loop.dial` (the engine's
    `dista_runtime._tls.handshake.Handshakes` gives one for each side)."""

    #: What to wrap the connection with: the server's context for accepted connections.
    context: ssl.SSLContext
    #: Whether this is the accepting side (the handshake's server).
    server_side: bool

    @property
    def timeout(self) -> float:
        """Seconds a handshake may take (0: no deadline of its own; the pending handshake
        caps still bound it)."""
        ...

    @property
    def most_pending(self) -> int:
        """Connections a listener may hold in their handshake at once: `UNATTACHED` (see
        `dista_runtime._net.limits`), or the pending-handshake cap and its margin
        (``EVICTING``) when set above it; at the bound a listener accepts again once one is
        settled."""
        ...

    def begin(self, peername: Any, cancel: Callable[[], object]) -> int:
        """A connection from ``peername`` came in and begins its handshake: a ticket for
        `settle`. ``cancel`` ends the handshake and closes the connection: called when
        the pending handshakes are at a cap and this one is the oldest (never the new one
        refused). 0 when nothing is counted."""
        ...

    def settle(self, ticket: int) -> None:
        """The handshake of ``ticket`` is over, whichever way (more than once is fine)."""
        ...

    def secured(self, link: int, stream: Stream) -> None:
        """``link``'s handshake is done (it is attached): check the peer's certificate,
        closing ``stream`` before any frame is read if its role may not be here."""
        ...

    def failed(self, link: int, peername: Any, why: str | BaseException) -> None:
        """The handshake of a connection from ``peername`` failed (``link`` is
        `dista_runtime._net.streams.ACCEPT_LATER` for one accepted but not yet counted),
        as ``why`` says (the loop's exception, whose kind tells a probe's bare connect and
        close from a failure worth a warning)."""
        ...


#: What `Loop.listen` and `Loop.dial` are given for TLS: a `Secure` side, or None (plain).
Tls: TypeAlias = Secure | None


class Loop(Protocol):
    """One event loop, as the runtime drives it (see the module docstring)."""

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object:
        """Call ``callback(*args)`` on the loop's next turn (from the loop's own thread)."""
        ...

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any) -> object:
        """`call_soon` from any thread; RuntimeError once the loop is closed."""
        ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        """Call ``callback(*args)`` in ``delay`` seconds, unless cancelled first."""
        ...

    def create_task(self, coro: Coroutine[Any, Any, None]) -> TaskHandle:
        """Run ``coro`` on the loop (a worker's ``async def`` task)."""
        ...

    def current_task(self) -> object:
        """The handle `create_task` gave for the coroutine running now, or None."""
        ...

    def listen(
        self,
        engine: Connections,
        host: str,
        port: int,
        sock: Any = None,
        tls: Tls = None,
    ) -> Listener:
        """Serve ``host:port`` (or the bound socket ``sock``): each connection gets a link
        from ``engine.accept()``, is attached with ``engine.attach`` and read into the
        engine; its end is ``engine.detach``. With ``tls``, a connection is counted and
        attached once its handshake is done. Listening starts before this returns."""
        ...

    def dial(
        self,
        engine: Connections,
        link: int,
        host: str,
        port: int,
        timeout: float,
        tls: Tls = None,
    ) -> None:
        """Connect ``link`` to ``host:port`` (``unix:PATH`` and port 0 for a Unix socket),
        in TLS with ``tls``: ``engine.attach`` it and call ``engine.dialed(link, "")``, or
        ``engine.dialed(link, why)`` if it fails within ``timeout`` seconds."""
        ...


#: What `Backend.run` is given: it begins a role on the loop, and gives the latch that ends
#: it.
Start: TypeAlias = Callable[[Loop], Latch[T]]
#: What `Backend.run` calls on SIGINT and SIGTERM, with the signal's number.
Stop: TypeAlias = Callable[[int], object]


class Background(Protocol):
    """A loop serving blocking callers (`Backend.background`)."""

    @property
    def loop(self) -> Loop: ...

    def stop(self) -> None:
        """End the loop (and its thread, if it has one of its own)."""
        ...

    def call_blocking(self, call: Callable[[], object]) -> None:
        """Run ``call``, which blocks (it joins threads, waits for latches), from a signal
        handler: there, when it runs on a thread that may block (the loop has a thread of
        its own); else where the loop lets it wait (gevent's hub runs a monkey-patched
        process's handlers, and may not block: a greenlet of its own)."""
        ...


class Backend(ABC):
    """One binding, as the runtime uses it: a class of static methods (the binding's own
    functions), named by its package's ``backend_class`` (anyio's shape). ``loop`` is the name the runtime chose
    it by (`dista_runtime.loops.LOOPS`): the anyio binding runs "anyio" on asyncio and
    "trio" on trio."""

    #: Its `Loop`: what `run` and `background` hand the runtime.
    loop_type: ClassVar[type[Loop]]

    @staticmethod
    @abstractmethod
    def run(start: Start[T], stop: Stop | None = None, *, loop: str) -> T:
        """A role's main: a loop runs until the latch ``start`` gives is settled; SIGINT
        and SIGTERM call ``stop`` with the signal's number (a head tells a stop from a pod
        being moved by it), on the loop; without it, Ctrl-C raises KeyboardInterrupt."""

    @staticmethod
    @abstractmethod
    def background(*, loop: str) -> Background:
        """A loop serving blocking callers (`dista.init`)."""

    @staticmethod
    @abstractmethod
    def wait(latch: Latch[T], timeout: float | None = None) -> T | Awaitable[T]:
        """``latch``'s result, waited for the way this loop waits (TimeoutError after
        ``timeout`` seconds): awaited on an async loop (`AsyncBackend`), cooperatively
        on gevent."""

    @staticmethod
    @abstractmethod
    def connect(
        address: str | None = None, *, timeout: float = 10.0
    ) -> AbstractContextManager[Any] | AbstractAsyncContextManager[Any]:
        """Join the head at ``address`` as this process's driver, on the caller's loop:
        a context manager (``async with`` on an async loop) giving the `dista.Cluster`.
        (Any here: the cluster is the hosts' type, above this module.)"""


class AsyncBackend(Backend):
    """A backend whose callers ``await``: `wait` gives a coroutine (``await ref``)."""

    # Not ``async def``: pyright types that as returning `types.CoroutineType`, which a
    # binding's ``wait`` handing on its own function's coroutine is not for mypy.
    @staticmethod
    @abstractmethod
    def wait(latch: Latch[T], timeout: float | None = None) -> Coroutine[Any, Any, T]:
        """``latch``'s result, without blocking the running loop."""
