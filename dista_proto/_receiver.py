"""The connection as its receive paths see it: what `dista_proto._incoming`'s two paths
read of it and call on it while they turn bytes into events.

Theory of operation
-------------------
`Connection` (`dista_proto._connection`) holds both receive paths and hands itself to them,
so each path needs the connection's checks and its three reactions to a frame. Typing them
against `Connection` itself would make the helpers import the module that imports them (a
circle in the import graph, even under TYPE_CHECKING). `Receiver` names exactly what they
use, and `Connection` satisfies it structurally: no base class, and no cost at run time.
The helpers import it only for type checking (making a Protocol class costs some 2.6
million instructions at import), and read the same attributes as before.

The members keep the connection's private names: they are its state, shared with its own
helper modules and no one else.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from ._decode import Decoder
from ._errors import RemoteProtocolError
from ._events import Event
from ._sinks import Allocate, PartSink

__all__ = ["Receiver"]


class Receiver(Protocol):
    """A connection's receive side, as the frame loop and the receive-into path use it."""

    @property
    def _error(self) -> RemoteProtocolError | None:
        """The receive error that broke the stream, or None."""

    @property
    def _limits(self) -> list[int]:
        """The largest body each kind byte may announce now (0: the kind may not come)."""

    @property
    def _decoders(self) -> dict[int, Decoder]:
        """The decoder of each kind byte (a part sink's, once one is set)."""

    @property
    def _from_head(self) -> bool:
        """Whether the peer is the head (some kinds decode differently from it)."""

    @property
    def _ready(self) -> deque[Event]:
        """The events decoded and not taken yet."""

    @property
    def _sink(self) -> PartSink | None:
        """Where large parts land, if anywhere."""

    @property
    def _allocate(self) -> Allocate | None:
        """Where other large payloads land on the receive-into path, if anywhere."""

    def _refuse(self, kind: int, length: int) -> None:
        """Raise the error a header announcing ``length`` bytes of ``kind`` deserves."""

    def _partial(self, kind: int, length: int) -> bool:
        """A large frame is in progress: reserve it under the head's cap (False: refused)."""

    def forget_partial(self) -> None:
        """The large frame in progress is whole: its reservation ends."""

    def _handshake(self, event: Event) -> None:
        """A hello or welcome arrived: open their side and take the limits that follow."""

    def _fail(self, error: RemoteProtocolError) -> None:
        """The peer broke the protocol: keep ``error`` and move their side to ERROR."""

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A writable view for the next bytes read from the peer."""

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view `get_buffer` returned."""
