"""What people call the IDs the head sees: labels drivers give (`Labels`, kind 42).

A task's function, an actor's class and ``Class.method`` of its calls travel as 64-bit
hashes; a person reads names. Drivers say what their IDs are called (the tasks they import
at hello, a function sent by value the first time it is) and the head keeps the labels for
status, its errors, and a dashboard (which asks for those from a position on: the table only
grows, so positions stay put).

A label is what a driver says: the first one given for an ID stays (a later driver cannot
rename another's function), and the table stops growing at `MAX_KNOWN_LABELS`, so that a
driver sending labels in a loop costs the head at most that.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_KNOWN_LABELS", "LabelTable"]

#: The most labels a head keeps (about 150 bytes each).
MAX_KNOWN_LABELS: Final = 1 << 16


class LabelTable:
    """ID -> label, in the order learned."""

    __slots__ = ("_by_id", "_order", "cap")

    def __init__(self, cap: int = MAX_KNOWN_LABELS) -> None:
        self.cap: int = cap
        self._by_id: dict[int, str] = {}
        self._order: list[int] = []

    def __len__(self) -> int:
        return len(self._order)

    def learn(self, entries: tuple[tuple[int, str], ...]) -> None:
        by_id = self._by_id
        for ident, label in entries:
            if ident not in by_id and len(self._order) < self.cap:
                by_id[ident] = label
                self._order.append(ident)

    def get(self, ident: int) -> str | None:
        return self._by_id.get(ident)

    def name(self, ident: int) -> str:
        """``ident``'s label, or its hex (never a bare number a person cannot look up)."""
        label = self._by_id.get(ident)
        return label if label is not None else f"{ident:#x}"

    def entries_from(self, start: int, most: int) -> tuple[tuple[int, str], ...]:
        """Up to ``most`` labels from the ``start``-th learned on."""
        by_id = self._by_id
        return tuple((i, by_id[i]) for i in self._order[start : start + most])
