"""Dista's extensions to the page: marks in the task-ID field of span, free and cancel.

The page leaves the task-ID field at 0 for kinds that do not use it, and a peer that knows
only the page ignores it there, so a mark in it changes nothing for such a peer: a span
still reads as the task's times, a free of an ID that names no object deletes nothing, a
cancel still cancels. docs/protocol.md, "Extensions", gives the reasoning for each.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CANCEL_FORCE",
    "FREE_WITHDRAW",
    "MIN_FETCH_PART",
    "SPAN_BLOCKED",
    "SPAN_RESUMED",
    "SPAN_WITHDRAWN",
]

#: Span mark, worker to head: the task blocked reading other objects; its slot is free
#: until `SPAN_RESUMED`, so the tasks it waits for can run (nested gets never deadlock).
SPAN_BLOCKED: Final = 1
#: Span mark: the blocked task runs again and takes a slot back.
SPAN_RESUMED: Final = 2
#: Span mark: the worker dropped the task without running it (after a free): no answers
#: follow; the head requeues it (a withdrawal) or settles it (a cancel).
SPAN_WITHDRAWN: Final = 3

#: Free mark, head to worker: take this task back if it has not started (the worker answers
#: `SPAN_WITHDRAWN`), else let it run. An unmarked free of a task the worker holds drops it
#: if it has not started, else interrupts it: the head cancelled it.
FREE_WITHDRAW: Final = 1

#: Cancel mark, driver to head: also end the worker process running the task.
CANCEL_FORCE: Final = 1

#: The smallest part an object server cuts an object into; a fetch asking for less is
#: refused with an error frame (a 1-byte part size would mean a frame per byte).
MIN_FETCH_PART: Final = 64 * 1024
