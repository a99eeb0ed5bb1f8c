"""The `Observer` core: hello, questions, answers, refusal and loss as decisions."""

from __future__ import annotations

import pytest

import dista_proto as dp
from dista_proto import encode_event


def _observer() -> tuple[dp.Observer, bytes]:
    core = dp.Observer()
    core.start(0)
    core.ask(dp.Status(), 0)
    out = b"".join(
        bytes(b) for d in core.decisions() if isinstance(d, dp.Write) for b in d.buffers
    )
    return core, out


def test_hello_then_the_question_as_the_page_writes_them() -> None:
    _, out = _observer()
    assert out == encode_event(dp.Hello(dp.frame.ROLE_OBSERVER)) + encode_event(dp.Status())


@pytest.mark.parametrize("cut", [1, 7, 1000])
def test_the_answer_is_a_decision_however_it_arrives(cut: int) -> None:
    core, _ = _observer()
    data = encode_event(dp.Status("dista head: epoch 0x1\n"), from_head=True)
    for i in range(0, len(data), cut):
        core.receive_data(dp.HEAD_LINK, data[i : i + cut], 0)
    assert core.decisions() == [dp.Answered(dp.Status("dista head: epoch 0x1\n"))]


def test_an_error_frame_is_a_refusal_and_a_closed_link_an_exit() -> None:
    core, _ = _observer()
    core.receive_data(dp.HEAD_LINK, encode_event(dp.Error(0, "not you"), from_head=True), 0)
    assert core.decisions() == [dp.Refused("not you")]
    core.connection_lost(dp.HEAD_LINK, 0)
    assert core.decisions() == [dp.Exit("the head refused: not you")]
    assert core.next_deadline() is None


def test_only_observer_questions_can_be_asked() -> None:
    core = dp.Observer()
    core.start(0)
    with pytest.raises(dp.LocalProtocolError):
        core.ask(dp.Stats(), 0)  # type: ignore[arg-type]
