"""A raw-socket peer for the named attacks of tests/processes/test_hostile.py: it writes frames
as bytes and reads back whole frames, so what an attacker gets is asserted frame by frame.
"""

from __future__ import annotations

import socket
import struct
import time

import dista_proto as dp
from dista_proto import frame as F

__all__ = ["RawPeer"]


class RawPeer:
    """One connection to a head or an object server, speaking frames by hand."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = bytearray()
        self.eof = False

    def send(self, *items: dp.Event | bytes) -> None:
        data = b"".join(i if isinstance(i, bytes) else dp.encode_event(i) for i in items)
        self.sock.sendall(data)

    def hello_driver(self, registry: int = 0x5EED) -> int:
        """Say hello as a driver; the number the welcome gives."""
        self.send(dp.Hello(F.ROLE_DRIVER, registry))
        event = self.next(10.0)
        assert isinstance(event, dp.Welcome), event
        return event.number

    def next(self, timeout: float) -> dp.Event | None:
        """The next frame the peer sends, decoded; None once it closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= F.PREFIX:
                (length,) = struct.unpack_from("<I", self.buf)
                if len(self.buf) >= F.PREFIX + length:
                    frame = bytes(self.buf[: F.PREFIX + length])
                    del self.buf[: F.PREFIX + length]
                    return dp.decode_event(frame, from_head=True)
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no frame within {timeout} s")
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
            self.buf += chunk

    def errors_until_closed(self, timeout: float) -> list[str]:
        """The messages of the error frames the peer sends until it closes the connection."""
        out = []
        while (event := self.next(timeout)) is not None:
            if isinstance(event, dp.Error):
                out.append(event.message)
        return out

    def close(self) -> None:
        self.sock.close()
