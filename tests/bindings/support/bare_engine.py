"""An engine with a bare core, for tests of a binding's connections: it numbers what it
accepts, reads into a scratch buffer, decides nothing, and records the links it lost."""

from __future__ import annotations

import socket
import time

import dista_proto as dp
from dista_runtime._hosts.engine import Engine
from dista_runtime._net.contract import Loop


class BareCore:
    """A `dista_proto.Core` with no protocol: links numbered from 1, bytes dropped."""

    def __init__(self) -> None:
        self.links = 0
        self.lost_links: list[int] = []

    def connection_made(self, now: int) -> int:
        self.links += 1
        return self.links

    def receive_data(self, link: int, data: dp.frame.Bytes, now: int) -> None:
        pass

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        return memoryview(bytearray(65536))

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        pass

    def connection_lost(self, link: int, now: int) -> None:
        self.lost_links.append(link)

    def decisions(self) -> list[dp.Decision]:
        return []

    def next_deadline(self) -> int | None:
        return None

    def on_timer(self, now: int) -> None:
        pass


class BareEngine(Engine):
    """``stopped``: its core has exited, so every connection that reaches it is aborted."""

    role_name = "test"

    def __init__(self, loop: Loop, *, stopped: bool = False) -> None:
        self.bare = BareCore()
        super().__init__(loop, self.bare)
        self.lost_links = self.bare.lost_links
        if stopped:
            self.exited.set("stopped")


def ends(peer: socket.socket, within: float = 10.0) -> bool:
    """Whether ``peer``'s connection ends (EOF, or a reset: closed unaccepted or aborted)
    within ``within`` seconds, reading what the kernel still had of it."""
    deadline = time.monotonic() + within
    peer.settimeout(1)
    while time.monotonic() < deadline:
        try:
            if not peer.recv(1 << 20):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            pass
    return False
