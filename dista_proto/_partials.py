"""One cap on the bytes a head's links hold in partly received large frames.

Theory of operation
-------------------
Each link holds at most one incomplete frame, bounded by its kind's largest body
(`MAX_FRAME`, 1 GiB, for a task): that bounds one link, not the head. Four links each
sending 200 MiB of an announced 1 GiB task frame held 829 MiB in the head, and more links
hold more. So a head's connections share one `PartialCap`: when the header of a frame of
`BIG_FRAME` (1 MiB) or more is in and the frame is not, the connection reserves the
frame's whole body under the cap (the bytes that will arrive, whether they land in an
allocated buffer or grow the read buffer). A frame that does not fit is refused at once,
from its header: an error frame naming the cap and what frames in progress hold, and the
link closes. Frames already reserved go on: the cap never cuts a peer mid-frame. The
reservation ends when the frame is whole, or when its link goes (a frame announced and
never sent is freed with its link: the hello and idle deadlines and the rate floor close
such links).

Smaller frames are not counted: a link holds at most one, under 1 MiB, and the
connection caps bound the links.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PARTIAL_CAP_BYTES", "PartialCap"]

#: The default cap: `MAX_FRAME`, so that the largest frame always fits alone.
PARTIAL_CAP_BYTES: Final = 1 << 30


class PartialCap:
    """Bytes reserved by frames in progress on a head's links, at most ``cap`` (0: no cap)."""

    __slots__ = ("cap", "held")

    def __init__(self, cap: int = PARTIAL_CAP_BYTES) -> None:
        self.cap: int = cap
        self.held: int = 0

    def reserve(self, size: int) -> str | None:
        """Reserve ``size`` bytes for a frame in progress; None, or why it is refused."""
        if self.cap and self.held + size > self.cap:
            return (
                f"a frame of {size} bytes would take the head's partly received frames past "
                f"its cap of {self.cap} bytes ({self.held} held by frames in progress): "
                "refused; send it again later, or raise the head's partial-frame cap"
            )
        self.held += size
        return None

    def release(self, size: int) -> None:
        self.held -= size
