"""Backpressure in a driver's session: a submit over the in-flight budget waits until answers
make room, an argument larger than the budget goes alone, the I/O thread never waits, and a
closed session wakes its waiters with an error. The session here is a real `Session` over a
real `Driver` core, fed the head's frames as bytes."""

from __future__ import annotations

import threading
import time

import pytest

import dista_proto as dp
from dista_runtime._errors import DistaError
from dista_runtime._session.budget import INFLIGHT_BYTES_ENV, inflight_budget
from dista_runtime._session.session import Session


class _IO:
    def __init__(self) -> None:
        self.io_thread = False

    def schedule_flush(self) -> None:
        pass

    def in_io_thread(self) -> bool:
        return self.io_thread


def _session(limit: int) -> tuple[Session, _IO]:
    io = _IO()
    session = Session(dp.Driver(registry_hash=1), io)
    session.budget.limit = limit
    session.start()
    session.decisions()
    _answer(session, dp.Welcome(2, 7))
    return session, io


def _answer(session: Session, event: dp.Event) -> None:
    session.receive_data(dp.HEAD_LINK, dp.encode_event(event, from_head=True), 0)
    session.decisions()  # as the engine does after every read: waiters are woken here


def _submit_in_thread(session: Session, nbytes: int) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []

    def submit() -> None:
        try:
            out.append(session.submit(7, b"x" * nbytes, (), 1))
        except Exception as e:
            out.append(e)

    thread = threading.Thread(target=submit, daemon=True)
    thread.start()
    return thread, out


def test_a_submit_over_the_budget_waits_until_an_answer_makes_room() -> None:
    session, _ = _session(1000)
    first = session.submit(7, b"a" * 600, (), 1)
    thread, out = _submit_in_thread(session, 600)
    thread.join(0.5)
    assert thread.is_alive() and out == []  # 1,200 would pass the budget: it waits
    assert session.core.inflight_bytes == 600
    _answer(session, dp.Result(first, b"ok"))
    thread.join(5)
    assert len(out) == 1 and isinstance(out[0], int)
    assert session.core.inflight_bytes == 600
    assert session.budget.waits == 1


def test_an_argument_larger_than_the_budget_goes_once_nothing_else_is_in_flight() -> None:
    session, _ = _session(1000)
    alone = session.submit(7, b"b" * 5000, (), 1)  # nothing in flight: it goes
    thread, out = _submit_in_thread(session, 10)
    thread.join(0.3)
    assert out == [] and session.core.inflight_bytes == 5000
    _answer(session, dp.Result(alone, b"ok"))
    thread.join(5)
    assert len(out) == 1 and session.core.inflight_bytes == 10


def test_small_arguments_under_the_budget_never_wait() -> None:
    session, _ = _session(1000)
    for _ in range(9):
        session.submit(7, b"c" * 100, (), 1)
    assert session.core.inflight_bytes == 900 and session.budget.waits == 0


def test_the_io_thread_and_a_budget_of_zero_never_wait() -> None:
    session, io = _session(1000)
    io.io_thread = True
    session.submit(7, b"d" * 900, (), 1)
    session.submit(7, b"d" * 900, (), 1)  # over, but waiting here would stop the answers
    io.io_thread = False
    session.budget.limit = 0
    session.submit(7, b"d" * 900, (), 1)
    assert session.core.inflight_bytes == 2700 and session.budget.waits == 0


def test_a_closed_session_wakes_its_waiters_with_an_error() -> None:
    session, _ = _session(100)
    session.submit(7, b"e" * 100, (), 1)
    thread, out = _submit_in_thread(session, 100)
    time.sleep(0.2)
    session.close("the driver shut down")
    thread.join(5)
    assert len(out) == 1 and isinstance(out[0], DistaError), out


def test_the_budget_setting_takes_sizes_and_names_itself_when_bad(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(INFLIGHT_BYTES_ENV, "64MiB")
    assert inflight_budget() == 64 << 20
    monkeypatch.setenv(INFLIGHT_BYTES_ENV, "1GB")
    assert inflight_budget() == 10**9
    monkeypatch.setenv(INFLIGHT_BYTES_ENV, "0")
    assert inflight_budget() == 0
    monkeypatch.setenv(INFLIGHT_BYTES_ENV, "lots")
    with pytest.raises(ValueError, match=INFLIGHT_BYTES_ENV):
        inflight_budget()
