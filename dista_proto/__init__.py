"""dista_proto: the pure sans-IO core of Dista.

Bytes in, events and decisions out. Nothing here touches a socket, a clock, a thread or a
random source: time and randomness are arguments, so one core serves every event loop and
whole clusters run inside a test. The wire format itself is `dista_proto.frame`.
"""

from __future__ import annotations

from . import frame
from ._codec import decode_event, encode_event
from ._connection import NEED_DATA, Connection, ConnectionState, NeedData
from ._decisions import (
    CancelTask,
    Close,
    Connect,
    Decision,
    Exit,
    ObjectFailed,
    ObjectLocated,
    ObjectValue,
    RunTask,
    StatsReceived,
    TimelineReceived,
    Welcomed,
    Write,
)
from ._driver import Driver
from ._errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from ._events import (
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorRestore,
    Address,
    Adopt,
    Adopted,
    Cancel,
    Checkpoint,
    Checkpointed,
    Claim,
    ConnectionClosed,
    Covered,
    Drain,
    Error,
    Event,
    Fetch,
    Free,
    HeadStats,
    Hello,
    Holding,
    HoldingEntry,
    InlineInput,
    Located,
    LocatedInput,
    Part,
    Release,
    Result,
    Resume,
    Resumed,
    Span,
    Stats,
    Status,
    Stop,
    Stored,
    Task,
    TaskAfter,
    TaskInput,
    TaskInputs,
    TaskMany,
    Timeline,
    TimelineRecord,
    Welcome,
)
from ._extensions import (
    CANCEL_FORCE,
    FREE_WITHDRAW,
    MIN_FETCH_PART,
    SPAN_BLOCKED,
    SPAN_RESUMED,
    SPAN_WITHDRAWN,
)
from ._head import TIMELINE_CAP, Head, retry_limit
from ._roles import Role, allowed_kinds
from ._worker import DEFAULT_INLINE_THRESHOLD, Worker

__all__ = [
    "CANCEL_FORCE",
    "DEFAULT_INLINE_THRESHOLD",
    "FREE_WITHDRAW",
    "MIN_FETCH_PART",
    "SPAN_BLOCKED",
    "SPAN_RESUMED",
    "SPAN_WITHDRAWN",
    "NEED_DATA",
    "TIMELINE_CAP",
    "CancelTask",
    "Close",
    "Connect",
    "Decision",
    "Driver",
    "Exit",
    "Head",
    "retry_limit",
    "ObjectFailed",
    "ObjectLocated",
    "ObjectValue",
    "RunTask",
    "StatsReceived",
    "TimelineReceived",
    "Welcomed",
    "Worker",
    "Write",
    "ActorCall",
    "ActorCreate",
    "ActorKill",
    "ActorRestore",
    "Address",
    "Adopt",
    "Adopted",
    "Cancel",
    "Checkpoint",
    "Checkpointed",
    "Claim",
    "Connection",
    "ConnectionClosed",
    "ConnectionState",
    "Covered",
    "Drain",
    "Error",
    "Event",
    "Fetch",
    "Free",
    "HeadStats",
    "Hello",
    "Holding",
    "HoldingEntry",
    "InlineInput",
    "LocalProtocolError",
    "Located",
    "LocatedInput",
    "NeedData",
    "Part",
    "ProtocolError",
    "Release",
    "RemoteProtocolError",
    "Result",
    "Resume",
    "Resumed",
    "Role",
    "Span",
    "Stats",
    "Status",
    "Stop",
    "Stored",
    "Task",
    "TaskAfter",
    "TaskInput",
    "TaskInputs",
    "TaskMany",
    "Timeline",
    "TimelineRecord",
    "Welcome",
    "allowed_kinds",
    "decode_event",
    "encode_event",
    "frame",
]


def _rehome() -> None:
    """Public classes say where users import them from (as httpcore does)."""
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) and obj.__module__.startswith("dista_proto._"):
            obj.__module__ = __name__


_rehome()
