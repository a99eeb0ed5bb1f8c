"""What the contract suite (`tests/bindings/test_loop_contract.py`) knows of the binding
interface, in one place: how each binding is started (`Binding`: its ``background``,
``run`` and ``wait``), the engine its connections read into (`ContractEngine`, a bare
engine whose core records what it gets), how a test listens, dials, writes and closes
through that engine from its own thread (`Rig`), and how TLS is configured.

The tests themselves say only what must hold; when the interface changes (how TLS is
given, how a paused link is asked about, the typed backend of each binding), this module is what
follows it.

Everything on a loop runs on that loop's thread: `Rig.call` hands a call to it with
``call_soon_threadsafe`` and waits for its result (or exception) with a `Latch`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import os
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import pytest

import dista_proto as dp
from dista_runtime import loops
from dista_runtime._hosts.engine import CLOSE_GRACE_S, Engine
from dista_runtime._net.contract import Backend, Background, Listener, Loop
from dista_runtime._net.latch import Latch
from dista_runtime._tls.config import TLS, PeerIdentity, tls_for
from tests.bindings.support.bare_engine import BareCore, ends

__all__ = [
    "BINDINGS",
    "Binding",
    "ContractCore",
    "ContractEngine",
    "Received",
    "Rig",
    "blackhole",
    "client_context",
    "digest",
    "ends",
    "make_certificates",
    "open_sockets",
    "read_digest",
    "read_to_end",
    "tls_config",
    "tls_refused",
    "until",
]

T = TypeVar("T")

#: How much one read of the core asks the binding to fill.
READ_SIZE = 256 << 10


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _params() -> list[Any]:
    """Every binding, each skipped (saying why) where it is not installed: asyncio on its
    own loop, asyncio on uvloop, anyio on asyncio, anyio on trio, gevent."""
    needs = {"asyncio": "asyncio", "uvloop": "asyncio", "anyio": "anyio", "trio": "trio"}
    out = []
    for name in ("asyncio", "uvloop", "anyio", "trio", "gevent"):
        loop = needs.get(name, name)
        missing = "" if loops.available(loop) else f"the {loop} binding is not installed"
        if name == "uvloop" and not missing and not _importable("uvloop"):
            missing = "uvloop is not installed"
        marks = [pytest.mark.skipif(bool(missing), reason=missing)] if missing else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


BINDINGS = _params()


# -- starting a binding ------------------------------------------------------------------------


class Binding:
    """One binding under test, started the ways the runtime starts it."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: The loop name the runtime knows it by (uvloop is the asyncio binding's choice).
        self.loop = "asyncio" if name == "uvloop" else name
        self.module: type[Backend] = loops.backend(self.loop)

    @contextlib.contextmanager
    def _chosen(self) -> Iterator[None]:
        """The asyncio binding takes uvloop when it can: "asyncio" is its own loop."""
        if self.name == "asyncio":
            with mock.patch.dict(sys.modules, {"uvloop": None}):
                yield
        else:
            yield

    def background(self) -> Background:
        """A loop of its own thread serving blocking callers (the binding's ``background``)."""
        with self._chosen():
            served: Background = self.module.background(loop=self.loop)
        return served

    def run(self, start: Callable[[Loop], Latch[T]]) -> T:
        """A role's main on this thread (the binding's ``run``)."""
        with self._chosen():
            result: T = self.module.run(start, loop=self.loop)
        return result

    def own_thread(self, body: Callable[[], T], timeout: float = 20.0) -> T:
        """``body()``, on a thread of its own for gevent (whose hub, once made, stays with
        its thread: it is destroyed after), here for the others (their runs leave nothing)."""
        if self.loop != "gevent":
            return body()
        done: Latch[T] = Latch()

        def main() -> None:
            from gevent import get_hub

            try:
                done.set(body())
            except BaseException as e:
                done.fail(e)
            finally:
                get_hub().destroy(destroy_loop=True)

        thread = threading.Thread(target=main, name="contract-gevent")
        thread.start()
        thread.join(timeout)
        assert not thread.is_alive(), "the gevent body did not end in time"
        return done.result()

    def sleep(self, seconds: float) -> Coroutine[Any, Any, None]:
        """A sleep for a coroutine the loop runs (`Loop.create_task`): gevent runs its
        coroutines on asyncio."""
        if self.loop in ("anyio", "trio"):
            import anyio

            return anyio.sleep(seconds)
        return asyncio.sleep(seconds)

    def waited(self, latch: Latch[T], timeout: float | None = None) -> tuple[T, int]:
        """``latch``'s result as the binding's ``wait`` gives it on a new loop of the
        binding (on this thread), and how often a ticker on that loop ran meanwhile (every
        10 ms): a wait that blocked the loop lets it tick at most once."""
        if self.loop == "gevent":
            return self._waited_gevent(latch, timeout)
        if self.loop == "asyncio":
            return self._waited_asyncio(latch, timeout)
        return self._waited_anyio(latch, timeout)

    def _waited_asyncio(self, latch: Latch[T], timeout: float | None) -> tuple[T, int]:
        ticks = [0]

        async def main() -> T:
            ticker = asyncio.ensure_future(_tick(asyncio.sleep, ticks))
            try:
                value: T = await self.module.wait(latch, timeout)
            finally:
                ticker.cancel()
            return value

        factory = asyncio.new_event_loop
        if self.name == "uvloop":
            factory = importlib.import_module("uvloop").new_event_loop
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main()), ticks[0]

    def _waited_anyio(self, latch: Latch[T], timeout: float | None) -> tuple[T, int]:
        import anyio

        ticks = [0]
        outcome: Latch[T] = Latch()

        async def main() -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(_tick, anyio.sleep, ticks)
                try:  # the outcome leaves the group as it is, not in an exception group
                    outcome.set(await self.module.wait(latch, timeout))
                except Exception as e:
                    outcome.fail(e)
                group.cancel_scope.cancel()

        anyio.run(main, backend="trio" if self.loop == "trio" else "asyncio")
        return outcome.result(), ticks[0]

    def _waited_gevent(self, latch: Latch[T], timeout: float | None) -> tuple[T, int]:
        import gevent

        ticks = [0]

        def tick() -> None:
            while True:
                gevent.sleep(0.01)
                ticks[0] += 1

        ticker = gevent.spawn(tick)
        try:
            value: T = self.module.wait(latch, timeout)
        finally:
            ticker.kill()
        return value, ticks[0]


async def _tick(sleep: Callable[[float], Any], ticks: list[int]) -> None:
    while True:
        await sleep(0.01)
        ticks[0] += 1


# -- the engine --------------------------------------------------------------------------------


@dataclass
class Received:
    """What one link read into the core: how many bytes, and their digest."""

    count: int = 0
    hasher: Any = field(default_factory=hashlib.blake2b)

    def add(self, data: memoryview) -> None:
        self.count += len(data)
        self.hasher.update(data)

    def digest(self) -> bytes:
        return bytes(self.hasher.digest())


def digest(data: bytes | bytearray | memoryview) -> bytes:
    """What `Received.digest` gives for ``data``."""
    return hashlib.blake2b(data).digest()


class ContractCore(BareCore):
    """A bare core that records what each link reads, and writes what link A reads to link
    B for every ``forward[A] = B`` (a source feeding a peer)."""

    def __init__(self) -> None:
        super().__init__()
        self.received: dict[int, Received] = {}
        self.forward: dict[int, int] = {}
        self._buffers: dict[int, memoryview] = {}
        self._decided: list[dp.Decision] = []

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        if link not in self._buffers:
            self._buffers[link] = memoryview(bytearray(READ_SIZE))
        return self._buffers[link]

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        data = self._buffers[link][:nbytes]
        self.received.setdefault(link, Received()).add(data)
        if link in self.forward:
            self._decided.append(dp.Write(self.forward[link], [bytes(data)]))

    def decisions(self) -> list[dp.Decision]:
        out, self._decided = self._decided, []
        return out


class ContractEngine(Engine):
    """An engine over a `ContractCore`: it records how its dials ended and the TLS
    handshakes that failed, and lets in any peer whose certificate grants a role.
    ``stopped``: its core has exited, so every connection that reaches it is aborted."""

    role_name = "test"

    def __init__(self, loop: Loop, stopped: bool = False, tls: TLS | None = None) -> None:
        self.bare = ContractCore()
        super().__init__(loop, self.bare)
        self.dials: dict[int, str] = {}
        self.tls_failures: list[str | BaseException] = []
        self.identities: dict[int, PeerIdentity] = {}  # link -> the certificate it showed
        self.use_tls(tls)
        if self.handshakes is not None:  # every failed handshake is recorded, then logged
            log_failure = self.handshakes.failed

            def failed(link: int, peername: Any, why: str | BaseException) -> None:
                self.tls_failures.append(why)
                log_failure(link, peername, why)

            self.handshakes.failed = failed  # type: ignore[method-assign]
        if stopped:
            self.exited.set("stopped")

    def dialed(self, link: int, error: str) -> None:
        self.dials[link] = error
        super().dialed(link, error)

    def authenticated(self, link: int, roles: frozenset[str], identity: PeerIdentity) -> bool:
        self.identities[link] = identity
        return bool(roles)


class Rig:
    """A `ContractEngine` on ``binding``'s background loop, driven from the test's thread."""

    def __init__(self, binding: Binding, *, stopped: bool = False, tls: TLS | None = None):
        self.binding = binding
        self.served = binding.background()
        self.loop: Any = self.served.loop
        self.listeners: list[Listener] = []
        self.engine: ContractEngine = self.call(ContractEngine, self.loop, stopped, tls)
        self.core = self.engine.bare

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 10.0) -> T:
        """``fn(*args)`` on the loop, its result (or exception) here."""
        done: Latch[T] = Latch()

        def run() -> None:
            try:
                done.set(fn(*args))
            except BaseException as e:
                done.fail(e)

        self.loop.call_soon_threadsafe(run)
        return done.wait(timeout)

    # -- connections --

    def listen(self, host: str = "127.0.0.1", port: int = 0) -> tuple[str, int]:
        """Listen at ``host:port`` (``unix:PATH`` and 0 for a Unix socket): the address."""
        listener = self.call(
            self.loop.listen, self.engine, host, port, None, self.engine.secure(dialing=False)
        )
        self.listeners.append(listener)
        return listener.address

    def close_listeners(self) -> None:
        listeners, self.listeners = self.listeners, []
        for listener in listeners:
            self.call(listener.close)

    def dial(self, link: int, address: tuple[str, int], timeout: float = 5.0) -> None:
        """Connect ``link`` to ``address`` (how it went: `dialed`)."""
        self.call(self.engine.dial, link, *address, timeout)

    def dialed(self, link: int, within: float = 10.0) -> str:
        """How ``link``'s dial ended: "" (attached), or why it failed."""
        until(lambda: link in self.engine.dials, within)
        return self.engine.dials[link]

    def links(self) -> list[int]:
        """The links attached now."""
        return self.call(lambda: sorted(self.engine.transports))

    def until_links(self, links: list[int], within: float = 10.0) -> None:
        until(lambda: self.links() == links, within)

    def write(self, link: int, *buffers: bytes | memoryview) -> None:
        """Write ``buffers`` to ``link``, as the core's `Write` is carried out."""
        self.call(self.engine.act, [dp.Write(link, list(buffers))])

    def write_stream(self, link: int, data: bytes) -> None:
        """Hand ``data`` to ``link``'s stream whole (`Stream.write`), past the engine."""
        self.call(lambda: self.engine.transports[link].write(data))

    def close(self, link: int) -> None:
        """Close ``link`` as the core does (`Close`): what is buffered goes first."""
        self.call(self.engine.act, [dp.Close(link, "test over")])

    def abort(self, link: int) -> None:
        """Drop ``link`` now, with what is buffered for it."""
        self.call(lambda: self.engine.transports[link].abort())

    def buffered(self, link: int) -> int:
        """How many bytes wait in ``link``'s stream (0 once it is gone)."""

        def size() -> int:
            stream = self.engine.transports.get(link)
            return stream.get_write_buffer_size() if stream is not None else 0

        return self.call(size)

    def paused(self, link: int) -> bool:
        """Whether the engine holds ``link`` over its high-water mark."""
        return self.call(lambda: link in self.engine.paused)

    def forward(self, source: int, to: int) -> None:
        """From now on, what ``source`` reads is written to ``to``."""
        self.call(self.core.forward.__setitem__, source, to)

    def received(self, link: int) -> Received:
        return self.call(lambda: self.core.received.get(link, Received()))

    def reading_links(self) -> list[int]:
        """The links that read any byte into the core."""
        return self.call(lambda: sorted(self.core.received))

    def tls_failures(self) -> list[str]:
        """Why each TLS handshake that failed failed, in order."""
        return self.call(lambda: list(self.engine.tls_failures))

    def identities(self) -> dict[int, PeerIdentity]:
        """The certificate each accepted TLS link showed, by link."""
        return self.call(lambda: dict(self.engine.identities))

    def counted(self) -> int:
        """How many connections the core was told of (`connection_made`)."""
        return self.call(lambda: self.core.links)

    def lost(self) -> list[int]:
        """The links the core was told ended, in order."""
        return self.call(lambda: list(self.core.lost_links))

    def close_all(self) -> None:
        self.call(self.engine.close_all)

    def drained(self) -> bool:
        return self.engine.drained.done()

    def stop(self) -> None:
        """Close what it listens on and every connection, then end the loop and its thread."""
        try:
            self.close_listeners()
            self.close_all()
            self.engine.drained.wait(CLOSE_GRACE_S + 5)
        finally:
            self.served.stop()


# -- TLS ---------------------------------------------------------------------------------------


def make_certificates(folder: Path) -> None:
    """A cluster's certificates as `dista certs` makes them, in ``folder``, and a pair from
    another cluster's CA (``stranger``)."""
    from dista_runtime._tls import certs

    certs.write_quickstart(folder)
    cert, key = certs.issue(certs.make_ca("another cluster"), "stranger", ["driver"])
    (folder / "stranger.pem").write_bytes(cert)
    (folder / "stranger.key").write_bytes(key)
    (folder / "stranger.key").chmod(0o600)


def tls_config(folder: Path, role: str) -> TLS:
    """The TLS a process in ``role`` takes from ``--tls-dir folder``."""
    with mock.patch.dict(os.environ, {"DISTA_TLS_DIR": str(folder)}):
        for name in ("DISTA_TLS_CA", "DISTA_TLS_CERT", "DISTA_TLS_KEY"):
            os.environ.pop(name, None)
        tls = tls_for(role)
    assert tls is not None
    return tls


def client_context(folder: Path, name: str | None) -> ssl.SSLContext:
    """A TLS client trusting ``folder``'s CA, showing the pair ``name`` (None: no
    certificate)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cafile=str(folder / "ca.pem"))
    if name is not None:
        context.load_cert_chain(str(folder / f"{name}.pem"), str(folder / f"{name}.key"))
    return context


def tls_refused(address: tuple[str, int], context: ssl.SSLContext) -> bool:
    """Whether a TLS client with ``context`` is refused at ``address``: its handshake
    fails, or (TLS 1.3 tells a client so on its first read) its connection ends before
    a byte comes back."""
    try:
        with (
            socket.create_connection(address, timeout=5) as raw,
            context.wrap_socket(raw) as sock,
        ):
            sock.sendall(b"hello" * 100)
            return sock.recv(100) == b""
    except (ssl.SSLError, ConnectionError):
        return True


# -- the test's side of a connection -----------------------------------------------------------


def until(condition: Callable[[], object], within: float = 10.0) -> None:
    """Wait (polling) until ``condition()`` holds; AssertionError after ``within`` s."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"not within {within} s"
        time.sleep(0.005)


def read_digest(peer: socket.socket, size: int, within: float = 10.0) -> bytes:
    """The digest (`digest`) of the next ``size`` bytes ``peer`` reads."""
    hasher, count = hashlib.blake2b(), 0
    peer.settimeout(within)
    while count < size:
        chunk = peer.recv(min(1 << 20, size - count))
        assert chunk, f"ended after {count} of {size} bytes"
        hasher.update(chunk)
        count += len(chunk)
    return hasher.digest()


def read_to_end(peer: socket.socket, within: float = 20.0) -> tuple[bytes, str]:
    """Everything ``peer`` reads until its connection ends, and how it ended: "eof" or
    "reset"; AssertionError if it does not end within ``within`` seconds."""
    deadline = time.monotonic() + within
    peer.settimeout(0.5)
    got = bytearray()
    while time.monotonic() < deadline:
        try:
            chunk = peer.recv(1 << 20)
        except ConnectionResetError:
            return bytes(got), "reset"
        except TimeoutError:
            continue
        if not chunk:
            return bytes(got), "eof"
        got += chunk
    raise AssertionError(f"the connection did not end within {within} s ({len(got)} bytes)")


@contextlib.contextmanager
def blackhole() -> Iterator[tuple[str, int]]:
    """A loopback address whose connections never complete: a listener that accepts
    nothing, its one-place queue full, so that the kernel drops the SYNs of the rest."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        with socket.create_connection(address, timeout=5):  # the queue's one place
            yield address


def open_sockets() -> int:
    """This process's open sockets (uvloop opens a spare /dev/null on first accept: not
    counted)."""
    where = f"/proc/{os.getpid()}/fd"
    count = 0
    for fd in os.listdir(where):
        try:
            count += os.readlink(f"{where}/{fd}").startswith("socket:")
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return count
