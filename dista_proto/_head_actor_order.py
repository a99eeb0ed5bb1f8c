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

from collections.abc import Callable, Sequence
from typing import Final, Protocol, TypeVar

from ._conventions import ID_BITS
from ._head_records import ActorRecord, ActorState
from ._head_wire import Wire

__all__ = ["NEW", "Replays", "plan_replay", "replay_order"]


class _Call(Protocol):
    oid: int
    position: int


C = TypeVar("C", bound=_Call)


def replay_order(calls: Sequence[C], base: int = 0) -> list[C]:
    """``calls`` (in arrival order: each caller's in the order it made them) in the order to
    replay them from the checkpoint covering ``base`` calls (see the module docstring):
    the places up to ``base`` are that checkpoint's, none of them free."""
    return plan_replay(calls, base)[0]  # (every caller that will come has)


def plan_replay(
    calls: Sequence[C], base: int = 0, final: bool = True, ran: int = 0
) -> tuple[list[C], bool]:
    """`replay_order`, and whether a place below the last known position (or below
    ``ran``: a live copy had seen that many calls) is still free (a gap: a caller that has
    not resumed yet may bring the call that ran there). Not ``final`` (such a caller may
    still come), calls no later call of their caller follows fill no place: the gap may be
    the late caller's."""
    known = {c.position for c in calls if c.position > 0}
    if not known:
        return list(calls), False
    by_caller: dict[int, list[int]] = {}
    for i, call in enumerate(calls):
        by_caller.setdefault(call.oid >> ID_BITS, []).append(i)
    keys: list[float] = [_END] * len(calls)
    taken: set[int] = set()
    trailing: list[tuple[float, list[int]]] = []  # (place after, calls) per caller
    for indices in by_caller.values():
        after = float(base)  # the place its previous call took (none free up to base)
        for n, i in enumerate(indices):
            call = calls[i]
            if call.position:
                if call.position > 0:
                    keys[i] = float(call.position)
                    after = max(after, keys[i])
                else:  # NEW: made after the restart, it ran nowhere: after every call
                    keys[i] = _LAST  # that may have run before (resent without a place)
                continue
            following = (calls[j].position for j in indices[n + 1 :] if calls[j].position > 0)
            before = next(following, 0)
            if not before:
                trailing.append((after, [j for j in indices[n:] if not calls[j].position]))
                break
            place = _free(after, before, known, taken)
            keys[i] = after = float(place) if place else before - 0.5
    # Calls no later call of their caller follows: into the places still free below the
    # last known one (someone ran there), else after everything.
    end = max(max(known), ran) + 1
    for after, indices in trailing if final else ():
        for i in indices:
            place = _free(after, end, known, taken)
            if not place:
                break
            keys[i] = after = float(place)
    for indices in by_caller.values():  # each caller's order, whatever its calls' keys
        highest = keys[indices[0]]
        for i in indices:
            highest = keys[i] = max(keys[i], highest)
    order = sorted(range(len(calls)), key=lambda i: (keys[i], i))
    gap = any(p not in known and p not in taken for p in range(base + 1, end))
    return [calls[i] for i in order], gap


#: `position` of a call made after the restart (it ran nowhere before).
NEW: Final = -1
#: The key of a call that goes after every placed one.
_END: Final = float(2**62)
#: The key of a call made after the restart: after every other.
_LAST: Final = float("inf")


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


class Replays:
    """The order of actors' calls replayed after a head restart, and the replays held for a
    call a caller not back yet may bring (`reorder`). `Actors` holds it."""

    def __init__(self, wire: Wire, grace: int, send_calls: Callable[[ActorRecord], None]) -> None:
        self._wire = wire
        self._grace = grace
        self._send_calls = send_calls
        #: Replays held: actor ID -> (the actor, until when).
        self._gaps: dict[int, tuple[ActorRecord, int]] = {}

    def reorder(self, actor: ActorRecord) -> None:
        """Put the calls not sent yet after a head restart in the order the head before
        ran them (`plan_replay`), numbered after those sent; with a place below the last
        known one still free, hold them until a caller brings its call or every caller
        that will resume has (the recovery grace after the first), whichever comes first.
        Called at the restore and for each call that comes while held."""
        calls = actor.calls
        if not any(c.position > 0 for c in calls):
            self._release(actor)
            return
        wire = self._wire
        began = wire.resumes_from
        until = (began if began is not None else wire.now) + self._grace
        final = wire.now >= until
        sent = [c for c in calls if c.seq <= actor.sent]
        later = [c for c in calls if c.seq > actor.sent]
        ordered, gap = plan_replay(later, actor.sent, final, actor.ran)
        calls.clear()
        calls.extend(sent)
        calls.extend(ordered)
        for seq, call in enumerate(ordered, actor.sent + 1):
            call.seq = seq
        if gap and not final:
            actor.gapped = True
            self._gaps[actor.actor_id] = (actor, until)
        else:
            self._release(actor)

    def _release(self, actor: ActorRecord) -> None:
        if actor.gapped:
            actor.gapped = False
            self._gaps.pop(actor.actor_id, None)
            if actor.worker is not None and actor.state is not ActorState.DEAD:
                self._send_calls(actor)

    def next_deadline(self) -> int | None:
        return min((until for _, until in self._gaps.values()), default=None)

    def expired(self, now: int) -> None:
        """Past the grace every caller that would come has: replays go past their gaps."""
        for actor, until in list(self._gaps.values()):
            if now >= until:
                self.reorder(actor)
