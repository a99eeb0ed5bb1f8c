"""Links read into place: the transport reads straight into the buffers the core offers.

With `asyncio.BufferedProtocol` the loop asks the protocol where to read (`get_buffer`),
reads there, and says how much it read (`buffer_updated`); uvloop and asyncio's selector
loop both do it with one ``recv_into``. The core (`Connection.get_buffer`) offers a reused
buffer for small frames and, for a large object coming from an object server, the object's
own buffer: its bytes are written once, by the read, and never copied in user space.
"""

from __future__ import annotations

import asyncio

from ._host import LinkBase

__all__ = ["BufferedLinkProtocol"]


class BufferedLinkProtocol(LinkBase, asyncio.BufferedProtocol):
    __slots__ = ()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.host.get_buffer(self.link, sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.host.on_updated(self.link, nbytes)
