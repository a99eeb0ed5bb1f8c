"""An engine with no core, for tests of a binding's connections: it numbers what it
accepts, reads into a scratch buffer, and records the links it lost."""

from __future__ import annotations

import socket
import time

import dista_proto as dp
from dista_runtime.engine import Engine
from dista_runtime.loop import Loop


class BareEngine(Engine):
    """``stopped``: its core has exited, so every connection that reaches it is aborted."""

    role_name = "test"

    def __init__(self, loop: Loop, *, stopped: bool = False) -> None:
        super().__init__(loop)
        self.links = 0
        self.lost_links: list[int] = []
        if stopped:
            self.exited.set("stopped")

    def accept(self) -> int:
        self.links += 1
        return self.links

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        return memoryview(bytearray(65536))

    def updated(self, link: int, nbytes: int) -> list[dp.Decision]:
        return []

    def lost(self, link: int) -> list[dp.Decision]:
        self.lost_links.append(link)
        return []


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
