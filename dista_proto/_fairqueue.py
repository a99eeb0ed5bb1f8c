"""Ready tasks, fair between drivers: one deque per driver, served round-robin.

Every operation is O(1) whatever the queue's length. Cancelled tasks are not searched for
and removed; they are skipped when they reach the front.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Protocol, TypeVar

__all__ = ["FairQueue", "has_work"]


class _Skippable(Protocol):
    @property
    def owner(self) -> int: ...

    @property
    def live(self) -> bool: ...


T = TypeVar("T", bound=_Skippable)


class FairQueue(Generic[T]):
    """Round-robin over owners; FIFO within an owner."""

    __slots__ = ("_owners", "_queues", "size")

    def __init__(self) -> None:
        self._owners: deque[int] = deque()
        self._queues: dict[int, deque[T]] = {}
        self.size = 0  # entries, live or not

    def push(self, item: T, *, front: bool = False) -> None:
        queue = self._queues.get(item.owner)
        if queue is None:
            queue = self._queues[item.owner] = deque()
            self._owners.append(item.owner)
        if front:
            queue.appendleft(item)
        else:
            queue.append(item)
        self.size += 1

    def peek(self) -> T | None:
        """The item `pop` would return next, left in place; None when nothing live is queued."""
        while self._owners:
            owner = self._owners[0]
            queue = self._queues[owner]
            item = queue[0]
            if item.live:
                return item
            queue.popleft()  # a dead item at the front: drop it now, as pop would
            self.size -= 1
            if not queue:
                del self._queues[owner]
                self._owners.popleft()
        return None

    def pop(self) -> T | None:
        """The next live item, fairly; None when nothing live is queued."""
        while self._owners:
            owner = self._owners.popleft()
            queue = self._queues[owner]
            item = queue.popleft()
            self.size -= 1
            if queue:
                self._owners.append(owner)
            else:
                del self._queues[owner]
            if item.live:
                return item
        return None

    def __len__(self) -> int:
        return self.size


def has_work(queue: FairQueue[T] | None) -> bool:
    """Whether ``queue`` holds a live task. (Not ``bool(queue)``: compiled by mypyc, a
    native class is always true, whatever its ``__len__``.)"""
    return queue is not None and queue.peek() is not None
