"""What a driver or worker tells its head about itself: the tasks it imports, labels of
its IDs, and its vitals.

The task names (kind 41, task-names: which workers serve which drivers) go right after
every hello, as the page's hello has no room for them.

Labels (kind 42) say what a driver's task, actor-class and method IDs are called; they are
kept here and said again after every hello, since a new head (after a restart) knows none.
Vitals (kind 43: process ID, memory, checkpoints written) are sent as the runtime reads
them, now and then. Neither changes what the head does with work: a head that knows only
the page never hears them (the runtime's cores send them to Dista's heads only).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from . import frame as F
from ._conventions import HEAD_LINK
from ._events import Labels, TaskNames, Vitals
from ._links import Links

__all__ = ["MAX_OWN_LABELS", "Telling"]

#: The most labels one process keeps to say again (the head keeps as many, from everyone).
MAX_OWN_LABELS: Final = 1 << 16


class Telling:
    """Labels kept and said again after each hello; vitals sent when given."""

    __slots__ = ("_labels", "_links", "task_names")

    def __init__(self, links: Links, task_names: Iterable[int] | None) -> None:
        # (Sent while no head link is open, a frame goes nowhere: the labels stay here.)
        self._links = links
        self._labels: dict[int, str] = {}
        #: Its tasks' name hashes, sent after each hello (task-names); None: none.
        self.task_names: tuple[int, ...] | None = (
            None if task_names is None else tuple(sorted(set(task_names)))
        )

    def label(self, entries: Iterable[tuple[int, str]]) -> None:
        """Say what these IDs are called (labels longer than `MAX_LABEL` bytes are cut)."""
        labels = self._labels
        fresh = []
        for ident, text in entries:
            if ident in labels or len(labels) >= MAX_OWN_LABELS:
                continue
            text = _clean(text)
            if text:
                labels[ident] = text
                fresh.append((ident, text))
        if fresh:
            self._send(fresh)

    def vitals(self, vitals: Vitals) -> None:
        self._links.send(HEAD_LINK, vitals)

    def hello(self) -> None:
        """The head just heard our hello: it hears our task names, and every label again."""
        if self.task_names is not None:
            self._links.send(HEAD_LINK, TaskNames(self.task_names))
        self._send(list(self._labels.items()))

    def _send(self, entries: list[tuple[int, str]]) -> None:
        for start in range(0, len(entries), F.MAX_LABELS):
            self._links.send(HEAD_LINK, Labels(tuple(entries[start : start + F.MAX_LABELS])))


def _clean(text: str) -> str:
    """``text`` as a label carries it: printable, at most `MAX_LABEL` bytes of UTF-8."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    data = text.encode("utf-8", "replace")[: F.MAX_LABEL]
    return data.decode("utf-8", "ignore")
