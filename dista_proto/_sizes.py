"""The sizes at which a connection stops copying bytes.

Both receive paths and the send side decide by them, so they live in one place
(docs/wire.md, "Buffers", gives them). A payload under `BIG_PAYLOAD` is copied (into an
event's own bytes, or into the one buffer small outgoing frames share); a larger one is
passed as a view. A frame of `BIG_FRAME` or more is collected as a list of its pieces
(`receive_data`) or, received into place with an ``allocate``, lands in a buffer of its own.
"""

from __future__ import annotations

from typing import Final

__all__ = ["BIG_FRAME", "BIG_PAYLOAD"]

#: Payloads at least this large are passed as views (received) or separate buffers (sent).
BIG_PAYLOAD: Final = 64 * 1024
#: A frame at least this large that arrives in pieces is collected as a list of pieces, or,
#: received into place with an ``allocate``, lands in a buffer of its own.
BIG_FRAME: Final = 1 << 20
