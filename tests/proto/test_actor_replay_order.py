"""The order a new head replays kept actor calls in (`replay_order`): the order the head
before ran them, from the positions their answers carried, whatever order callers resumed
in; a call whose answer was lost takes the free place its caller's order leaves it; each
caller's own order is kept always."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

import dista_proto as dp
from dista_proto._head_actor_order import NEW, plan_replay, replay_order


@dataclass
class Call:
    oid: int
    position: int = 0


def _id(caller: int, n: int) -> int:
    return caller << dp.ID_BITS | n


def _ids(calls: list[Call]) -> list[int]:
    return [c.oid for c in calls]


def test_callers_resuming_in_any_order_get_the_order_the_positions_say() -> None:
    a1, a2 = Call(_id(1, 1), 1), Call(_id(1, 2), 3)
    b1, b2 = Call(_id(2, 1), 2), Call(_id(2, 2), 4)
    # B resumed first, then A.
    assert _ids(replay_order([b1, b2, a1, a2])) == _ids([a1, b1, a2, b2])


def test_a_call_whose_answer_was_lost_takes_the_place_its_callers_order_leaves() -> None:
    a1, a2, a3 = Call(_id(1, 1), 1), Call(_id(1, 2)), Call(_id(1, 3), 4)
    b1, b2 = Call(_id(2, 1), 2), Call(_id(2, 2), 3)
    # a2 ran between a1 (1) and a3 (4), but B's calls take 2 and 3: no free place (a
    # history the positions cannot hold), so it goes just before a3, A's order kept.
    assert _ids(replay_order([b1, b2, a1, a2, a3])) == _ids([a1, b1, b2, a2, a3])
    # With B's second call at 5, place 3 is free: a2 ran there.
    b2.position = 5
    a3.position = 4
    assert _ids(replay_order([b1, b2, a1, a2, a3])) == _ids([a1, b1, a2, a3, b2])


def test_calls_nobody_has_an_answer_for_fill_free_places_then_go_last() -> None:
    a1, a2 = Call(_id(1, 1), 1), Call(_id(1, 2))
    b1, b2, b3 = Call(_id(2, 1), 3), Call(_id(2, 2)), Call(_id(2, 3))
    # 2 is free below the last known (3): someone ran there; A's a2 is first in line.
    assert _ids(replay_order([b1, b2, b3, a1, a2])) == _ids([a1, a2, b1, b2, b3])


def test_places_the_checkpoint_covers_are_not_free() -> None:
    # Restored from the checkpoint covering 199 calls: B's 200 and 201 are known; A's
    # last known answer was 151 (in the checkpoint) and its batch's answers were lost.
    b99, b100 = Call(_id(2, 99), 200), Call(_id(2, 100), 201)
    batch = [Call(_id(1, n)) for n in range(100, 150)]
    order = _ids(replay_order([*batch, b99, b100], base=199))
    assert order == _ids([b99, b100, *batch])  # not into 152..199: those are in it


def test_calls_made_after_the_restart_go_after_every_resent_one() -> None:
    # A's new call came first; B's resent calls (one with its place, one without: it may
    # have run) must all come before it.
    a_new = Call(_id(1, 9), NEW)
    b1, b2 = Call(_id(2, 1), 1), Call(_id(2, 2))
    assert _ids(replay_order([a_new, b1, b2])) == _ids([b1, b2, a_new])


def test_no_positions_keeps_the_arrival_order() -> None:
    calls = [Call(_id(2, 1)), Call(_id(1, 1)), Call(_id(2, 2))]
    assert replay_order(calls) == calls


@st.composite
def _history(draw: st.DrawFn) -> tuple[list[Call], list[int]]:
    """Calls of up to 4 callers run in some interleaving (positions 1..n); some answers
    lost; the callers resume in some order."""
    callers = draw(st.integers(1, 4))
    made = draw(st.lists(st.integers(1, callers), min_size=1, max_size=30))
    counts: dict[int, int] = {}
    ran: list[Call] = []
    for position, caller in enumerate(made, 1):
        counts[caller] = counts.get(caller, 0) + 1
        ran.append(Call(_id(caller, counts[caller]), position))
    lost = draw(st.sets(st.integers(0, len(ran) - 1)))
    truth = [c.oid for c in ran]
    for i in lost:
        ran[i].position = 0
    resume = draw(st.permutations(sorted(counts)))
    arrived = [c for caller in resume for c in ran if c.oid >> dp.ID_BITS == caller]
    return arrived, truth


@settings(max_examples=300, deadline=None)
@given(_history())
def test_each_callers_order_is_kept_and_one_lost_answer_is_placed_exactly(
    case: tuple[list[Call], list[int]],
) -> None:
    arrived, truth = case
    order = _ids(replay_order(arrived))
    assert sorted(order) == sorted(truth)
    for caller in {oid >> dp.ID_BITS for oid in truth}:
        mine = [oid for oid in order if oid >> dp.ID_BITS == caller]
        assert mine == sorted(mine)  # the order it made them in
    known = [c for c in arrived if c.position]
    placed = [c.oid for c in replay_order(arrived) if c.position]
    assert placed == [c.oid for c in sorted(known, key=lambda c: c.position)]
    if len(known) >= len(truth) - 1:
        assert order == truth  # at most one answer lost: the order is exact


def test_a_place_below_what_a_live_copy_had_seen_is_a_gap_to_wait_for() -> None:
    # Restored from a rebuild that saw A's two calls (known places 1 and 2); a stale copy
    # had seen 4 calls: B, not back yet, holds the answers at 3 and 4. A's call whose
    # answer was lost must not take place 3 before B comes (not final), nor be sent.
    a1, a2, a3 = Call(_id(1, 1), 1), Call(_id(1, 2), 2), Call(_id(1, 3))
    _, gap = plan_replay([a1, a2, a3], base=2, final=False)
    assert not gap  # (no copy said more ran: nothing to wait for)
    order, gap = plan_replay([a1, a2, a3], base=2, final=False, ran=4)
    assert gap
    b3, b4 = Call(_id(2, 1), 3), Call(_id(2, 2), 4)
    order, gap = plan_replay([a1, a2, a3, b3, b4], base=2, final=False, ran=4)
    assert not gap and _ids(order) == _ids([a1, a2, b3, b4, a3])
