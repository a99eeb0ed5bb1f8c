"""The order a new head replays an actor's kept calls in: the one the head before ran them.

Theory of operation. After a head restart, the calls callers resend come in the order
callers resume, not the order the actor ran them. Each answer told its caller where its call
ran (its *position*: the head's count of the actor's calls), and a resume says it again
(actor-order), so most kept calls arrive with their position. Those whose answer was lost
with the head arrive without one. Two facts place them:

- a caller's calls ran in the order it made them (the page: "calls run in the order the
  driver sent them"), so a call without a position ran after its caller's previous call
  with one and before its caller's next call with one;
- positions count every call, so the places no known position takes between two known ones
  are exactly where calls without one ran (or a caller that left and took its calls);
  the places the checkpoint the actor comes back from covers are none of them (the calls
  there are in it, and their callers let them go).

So each call without a position takes the first free place after its caller's previous
known call (or its previous placed one), if there is one before its caller's next known
call; else it goes just before that next call. A call no later call of its caller follows
takes, after those, the first free place left below the last known position (someone ran
there), or else goes after every placed call, in arrival order (it may never have run). Each caller's order is kept whatever happens, and where places are free the answers
callers hold are reproduced exactly. Two callers' calls both without positions in one window
with more than one free place cannot be told apart: they keep their arrival order (the
answers that would tell were lost with the head).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, TypeVar

from ._conventions import ID_BITS

__all__ = ["replay_order"]


class _Call(Protocol):
    oid: int
    position: int


C = TypeVar("C", bound=_Call)


def replay_order(calls: Sequence[C], base: int = 0) -> list[C]:
    """``calls`` (in arrival order: each caller's in the order it made them) in the order to
    replay them from the checkpoint covering ``base`` calls (see the module docstring):
    the places up to ``base`` are that checkpoint's, none of them free."""
    known = {c.position for c in calls if c.position}
    if not known:
        return list(calls)
    by_caller: dict[int, list[int]] = {}
    for i, call in enumerate(calls):
        by_caller.setdefault(call.oid >> ID_BITS, []).append(i)
    keys: list[float] = [_END] * len(calls)
    taken: set[int] = set()
    trailing: list[tuple[float, list[int]]] = []  # (place after, calls) per caller
    for indices in by_caller.values():
        after: float = base  # the place its previous call took (none free up to base)
        for n, i in enumerate(indices):
            call = calls[i]
            if call.position:
                keys[i] = call.position
                after = max(after, call.position)
                continue
            before = next((calls[j].position for j in indices[n + 1 :] if calls[j].position), 0)
            if not before:
                trailing.append((after, indices[n:]))
                break
            place = _free(after, before, known, taken)
            keys[i] = after = place if place else before - 0.5
    # Calls no later call of their caller follows: into the places still free below the
    # last known one (someone ran there), else after everything.
    end = max(known) + 1
    for after, indices in trailing:
        for i in indices:
            place = _free(after, end, known, taken)
            if not place:
                break
            keys[i] = after = place
    order = sorted(range(len(calls)), key=lambda i: (keys[i], i))
    return [calls[i] for i in order]


#: The key of a call that goes after every placed one.
_END: Final = float("inf")


def _free(after: float, before: int, known: set[int], taken: set[int]) -> int:
    """The first place above ``after`` and below ``before`` that no known position nor
    placed call takes (taken now); 0 if none."""
    place = int(after) + 1
    while place < before and (place in known or place in taken):
        place += 1
    if place >= before:
        return 0
    taken.add(place)
    return place
