"""Which of an actor's checkpoint files a restore may use: the chain of its builds.

Theory of operation. Each build of an actor (an incarnation, `CheckpointStore.begin`)
writes a fence holding the calls it began from (its *base*), the incarnation whose
checkpoint it restored them from (its *source*) and the epoch of the head that numbered it.
The newest incarnation is the one the heads count on. It continues its source's history up
to its base; the source continues its own source's up to its own base; and so on, back to a
create (base -1). That is the *chain*. A file is current when its incarnation is on the
chain and it covers no more calls than where the next build on the chain took over. Every
other file lies on a branch nobody continues (a copy a head left behind that still ran, or
a build a cut-off worker ran late), so it is never read, and the next prune removes it.

A fence written before sources were recorded continues the next older fence, as every fence
did then; one that cannot be read ends the chain (it hides every older file).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Fence", "chain"]


@dataclass(frozen=True, slots=True)
class Fence:
    """What a fence file holds."""

    #: The calls the build began from (-1: created, from nothing).
    base: int
    #: Drawn by the worker that claimed the number: a read-back tells whose claim won.
    token: str
    #: The epoch of the head that numbered the build (0: none did).
    epoch: int = 0
    #: The incarnation whose checkpoint at ``base`` it was restored from (None: not known).
    source: int | None = None

    def encode(self) -> bytes:
        source = "-" if self.source is None else str(self.source)
        return f"{self.base}\n{self.token}\n{self.epoch}\n{source}\n".encode()

    @classmethod
    def parse(cls, data: bytes) -> Fence | None:
        """A fence's content, None if it does not check out."""
        try:
            base, token, *rest = data.decode().split()
            epoch = int(rest[0]) if rest else 0
            source = int(rest[1]) if len(rest) > 1 and rest[1] != "-" else None
            return cls(int(base), token, epoch, source)
        except (ValueError, UnicodeDecodeError):
            return None


def chain(fences: dict[int, Fence | None]) -> dict[int, float]:
    """The incarnations on the chain, each with the most calls one of its files may cover
    and be current. Without fences, incarnation 0 (files of the previous release) is it."""
    if not fences:
        return {0: float("inf")}
    order = sorted(fences, reverse=True)
    limits: dict[int, float] = {}
    current, limit = order[0], float("inf")
    while current not in limits:
        limits[current] = limit
        fence = fences.get(current)
        if fence is None or fence.base < 0:
            break  # created (or unreadable, or its fence gone): nothing older is its
        if fence.source is not None:
            following = fence.source
        else:
            older = [i for i in order if i < current]
            following = older[0] if older else 0
        current, limit = following, fence.base
    return limits
