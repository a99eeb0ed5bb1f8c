"""A link between two protocols on one loop, without a socket, for any loop: the driver of
a local cluster and the head it runs on its own loop.

Through a socket, every message between them cost a write and a read system call and a
turn of the loop waiting for the read; here a write hands the bytes to the other end, which
takes them on the loop's next turn (the binding's ``call_soon``). It behaves as a transport
does where the engine (`dista_runtime._hosts.engine`) relies on it: `write` never blocks, the writer is paused above the high-water mark of what
the reader has not taken yet and resumed below the low one, the reader can pause reading,
and closing one end closes the other after it has taken what was already written.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from .streams import PEER_LABEL

__all__ = ["CallSoon", "LinkEnd", "MemoryTransport", "memory_link"]

#: The loop's "call this on your next turn" (asyncio's ``loop.call_soon``).
CallSoon = Callable[..., object]


class LinkEnd(Protocol):
    """What each end's protocol offers (asyncio's protocols have it): it is told of its
    transport, its writes' pressure and its end; it takes bytes by ``get_buffer`` and
    ``buffer_updated``, or, without them, ``data_received``."""

    def connection_made(self, transport: Any) -> None: ...

    def connection_lost(self, exc: Exception | None) -> None: ...

    def pause_writing(self) -> None: ...

    def resume_writing(self) -> None: ...


_HIGH = 64 << 10


class MemoryTransport:
    """One end of an in-process link; `memory_link` makes the pair."""

    def __init__(self, call_soon: CallSoon, protocol: LinkEnd) -> None:
        self._call_soon = call_soon
        self._protocol = protocol
        self.peer: MemoryTransport | None = None
        self._inbox: deque[bytes | memoryview] = deque()  # written by the peer, not taken yet
        self._inbox_size = 0
        self._reading = True
        self._scheduled = False
        self._closing = False
        self._lost = False
        self._high = _HIGH
        self._low = _HIGH // 4
        self._writing_paused = False

    # -- what the writer sees ----------------------------------------------------------------

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = _HIGH if high is None else high
        self._low = self._high // 4 if low is None else low

    def get_write_buffer_size(self) -> int:
        peer = self.peer
        return 0 if peer is None else peer._inbox_size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == PEER_LABEL:
            return "(in-process link)"
        return default  # no socket, no peer name

    def write(self, data: bytes | bytearray | memoryview) -> None:
        peer = self.peer
        if self._closing or peer is None or peer._closing:
            return
        # Bytes and views are kept as they are, as uvloop's transports keep them (the `Host`
        # never reuses a buffer it wrote: a large payload goes by without a copy); a
        # bytearray is copied, since its writer may change it once write returns.
        peer._take(bytes(data) if isinstance(data, bytearray) else data)
        if not self._writing_paused and peer._inbox_size > self._high:
            self._writing_paused = True
            self._protocol.pause_writing()

    def writelines(self, list_of_data: Any) -> None:
        self.write(b"".join(list_of_data))

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._call_soon(self._connection_lost)
        peer = self.peer
        if peer is not None and not peer._closing:
            peer._schedule(force=True)  # it takes what is left, then closes too

    def abort(self) -> None:
        self.close()

    # -- what the reader sees ----------------------------------------------------------------

    def is_reading(self) -> bool:
        return self._reading

    def pause_reading(self) -> None:
        self._reading = False

    def resume_reading(self) -> None:
        if not self._reading:
            self._reading = True
            self._schedule()

    def _take(self, data: bytes | memoryview) -> None:
        self._inbox.append(data)
        self._inbox_size += memoryview(data).nbytes
        self._schedule()

    def _schedule(self, force: bool = False) -> None:
        if not self._scheduled and (self._reading or force):
            self._scheduled = True
            self._call_soon(self._deliver)

    def _deliver(self) -> None:
        self._scheduled = False
        protocol = self._protocol
        while self._inbox and self._reading and not self._closing:
            data = self._inbox.popleft()
            self._inbox_size -= memoryview(data).nbytes
            get_buffer = getattr(protocol, "get_buffer", None)
            if get_buffer is not None:
                view = memoryview(data)
                while view:
                    buffer = memoryview(get_buffer(len(view)))
                    n = min(len(buffer), len(view))
                    buffer[:n] = view[:n]
                    view = view[n:]
                    protocol.buffer_updated(n)  # type: ignore[attr-defined]
            else:
                protocol.data_received(bytes(data))  # type: ignore[attr-defined]
        writer = self.peer
        if writer is not None and writer._writing_paused and self._inbox_size <= writer._low:
            writer._writing_paused = False
            writer._protocol.resume_writing()
        if writer is not None and writer._closing and not self._inbox:
            self.close()  # the peer closed and everything it wrote is taken

    def _connection_lost(self) -> None:
        if self._lost:
            return
        self._lost = True
        self._inbox.clear()
        self._inbox_size = 0
        self._protocol.connection_lost(None)


def memory_link(
    call_soon: CallSoon, a: LinkEnd, b: LinkEnd
) -> tuple[MemoryTransport, MemoryTransport]:
    """Connect protocols ``a`` and ``b`` on the loop of ``call_soon``: each gets
    `connection_made` with its end."""
    ta, tb = MemoryTransport(call_soon, a), MemoryTransport(call_soon, b)
    ta.peer, tb.peer = tb, ta
    a.connection_made(ta)
    b.connection_made(tb)
    return ta, tb
