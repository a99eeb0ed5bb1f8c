"""The lifecycles of the head's records (`dista_proto._lifecycle`): every (state, cause)
pair of every kind is walked, as h2's state machine tests do; moves keep the counters that
the states imply, and a pair a table does not have is refused naming both."""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dista_proto as dp
from dista_proto import _lifecycle as L
from dista_proto._events import ActorCreate
from dista_proto._head_counts import Counts
from dista_proto._head_records import ActorRecord, CallRecord, Peer, TaskRecord, TrackedObject

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def _task(state: L.TaskState) -> TaskRecord:
    task = TaskRecord(1 << 40 | 1, 7, 1, 0, 1, None, 0)
    task.state = state
    return task


def _object(state: L.ObjState) -> TrackedObject:
    obj = TrackedObject(1 << 40 | 1, 1, None)
    obj.state = state
    obj.size = 100
    return obj


def _actor(state: L.ActorState) -> ActorRecord:
    actor = ActorRecord(ActorCreate(1 << 40 | 1, 9, b""), 1, 0, 0)
    actor.state = state
    return actor


def _call(state: L.CallState) -> CallRecord:
    call = CallRecord(1, 1 << 40 | 2, 3, b"", 1)
    call.state = state
    return call


#: kind -> (table, states, causes, make a record in a state, move it, its state)
KINDS: dict[str, tuple[Any, type[enum.IntEnum], type[enum.IntEnum], Callable[..., Any]]] = {
    "task": (L.TASK_MOVES, L.TaskState, L.TaskCause, _task),
    "object": (L.OBJECT_MOVES, L.ObjState, L.ObjCause, _object),
    "actor": (L.ACTOR_MOVES, L.ActorState, L.ActorCause, _actor),
    "actor call": (L.CALL_MOVES, L.CallState, L.CallCause, _call),
}


def _move(counts: Counts, kind: str, record: Any, cause: Any) -> None:
    if kind == "task":
        counts.move_task(record, cause)
    elif kind == "object":
        counts.move_object(record, cause)
    elif kind == "actor":
        counts.move_actor(record, cause)
    else:
        counts.move_call(record, cause)


def _implied(kind: str, state: Any) -> tuple[int, int, int, int]:
    """(pending, running, held_bytes, actors_alive) one record in ``state`` counts for."""
    if kind == "task":
        pending = state in (L.TaskState.WAITING, L.TaskState.QUEUED)
        on_worker = (L.TaskState.RUNNING, L.TaskState.WITHDRAWING, L.TaskState.DROPPED)
        return int(pending), int(state in on_worker), 0, 0
    if kind == "object":
        return 0, 0, 100 * (state in (L.ObjState.INLINE, L.ObjState.STORED)), 0
    if kind == "actor":
        alive = state in (L.ActorState.WAITING, L.ActorState.STARTING, L.ActorState.READY)
        return 0, 0, 0, int(alive)
    return int(state is L.CallState.UNANSWERED), 0, 0, 0


def _counted(counts: Counts) -> tuple[int, int, int, int]:
    return counts.pending, counts.running, counts.held_bytes, counts.actors_alive


_PAIRS = [
    pytest.param(kind, state, cause, id=f"{kind}-{state.name}-{cause.name}")
    for kind, (_, states, causes, _) in KINDS.items()
    for state, cause in itertools.product(states, causes)
]


@pytest.mark.parametrize(("kind", "state", "cause"), _PAIRS)
def test_every_pair_moves_as_its_table_says_or_is_refused(
    kind: str, state: Any, cause: Any
) -> None:
    table, _, _, make = KINDS[kind]
    record = make(state)
    counts = Counts()
    # Start from the counts the state implies, as the head's would be.
    counts.pending, counts.running, counts.held_bytes, counts.actors_alive = _implied(kind, state)
    new = table.get((state, cause))
    if new is None:
        with pytest.raises(dp.LocalProtocolError) as refused:
            _move(counts, kind, record, cause)
        message = str(refused.value)
        assert state.name in message and cause.name in message and kind in message
        assert record.state is state  # nothing moved
        assert _counted(counts) == _implied(kind, state)
        return
    _move(counts, kind, record, cause)
    assert record.state is new
    assert _counted(counts) == _implied(kind, new)


#: The states each kind's records end in: no cause leaves them.
ENDS = {
    "task": {L.TaskState.DONE},
    "object": {L.ObjState.FORGOTTEN},
    "actor": {L.ActorState.DEAD},
    "actor call": {L.CallState.ANSWERED, L.CallState.FAILED},
}


def test_every_state_is_reached_and_only_the_ends_end() -> None:
    """No state is unreachable from the one a record is made in, and only the ends are
    left by no cause."""
    for kind, (table, states, _, _) in KINDS.items():
        first = min(states)  # NEW (or PENDING for objects): where a record is made
        reached, frontier = {first}, [first]
        while frontier:
            state = frontier.pop()
            for (old, _), new in table.items():
                if old is state and new not in reached:
                    reached.add(new)
                    frontier.append(new)
        assert reached == set(states), kind
        assert set(states) - {state for state, _ in table} == ENDS[kind], kind


_SLOT_PAIRS = [
    pytest.param(slot, cause, id=f"{slot.name}-{cause.name}")
    for slot, cause in itertools.product(L.Slot, L.SlotCause)
]


@pytest.mark.parametrize(("slot", "cause"), _SLOT_PAIRS)
def test_every_slot_pair_keeps_the_workers_counts(slot: L.Slot, cause: L.SlotCause) -> None:
    """A worker's free, spare, blocked and prefetched counts follow its tasks' slots."""
    worker = Peer(3)
    worker.free, worker.spare, worker.blocked, worker.prefetched = 2, 32, 0, 0
    task = _task(L.TaskState.RUNNING)
    task.spare_ns = 1000 if slot is L.Slot.SPARE else 0
    # The counts with the task holding ``slot``.
    held = {L.Slot.REAL: (1, 32, 0, 0), L.Slot.SPARE: (2, 31, 0, 1000), L.Slot.LENT: (2, 32, 1, 0)}
    worker.free, worker.spare, worker.blocked, worker.prefetched = held.get(slot, (2, 32, 0, 0))
    task.slot = slot
    new = L.SLOT_MOVES.get((slot, cause))
    counts = Counts()
    if new is None:
        with pytest.raises(dp.LocalProtocolError, match=f"{slot.name}.*{cause.name}"):
            counts.move_slot(task, worker, cause)
        return
    if cause is L.SlotCause.TAKE_SPARE:
        task.spare_ns = 1000
    counts.move_slot(task, worker, cause)
    assert task.slot is new
    got = (worker.free, worker.spare, worker.blocked, worker.prefetched)
    assert got == held.get(new, (2, 32, 0, 0))


@given(st.data())
def test_random_walks_keep_the_counts_the_states_imply(data: st.DataObject) -> None:
    """Many records of every kind, moved at random along their tables: the counters always
    equal what their states imply (no move forgets one)."""
    counts = Counts()
    records: list[tuple[str, Any]] = []
    for _ in range(data.draw(st.integers(1, 60))):
        kind = data.draw(st.sampled_from(sorted(KINDS)))
        table, states, _, make = KINDS[kind]
        if not records or data.draw(st.booleans()):
            records.append((kind, make(min(states))))
            continue
        kind, record = data.draw(st.sampled_from(records))
        table = KINDS[kind][0]
        causes = [cause for (state, cause) in table if state is record.state]
        if causes:
            _move(counts, kind, record, data.draw(st.sampled_from(causes)))
        totals = [_implied(k, r.state) for k, r in records]
        assert _counted(counts) == tuple(map(sum, zip(*totals, strict=True)))


def test_the_docs_draw_the_tables() -> None:
    """docs/protocol.md's lifecycle diagrams are the tables as `diagram` draws them."""
    text = DOCS.read_text()
    for name, table in (
        ("task", L.TASK_MOVES),
        ("slot", L.SLOT_MOVES),
        ("object", L.OBJECT_MOVES),
        ("actor", L.ACTOR_MOVES),
        ("actor call", L.CALL_MOVES),
    ):
        drawn = L.diagram(table.items())
        assert f"```mermaid\n{drawn}\n```" in text, f"the {name} diagram is not the table's"
    assert L.diagrams() in text  # in the order and with the names the docs give
