"""The answers of an actor's recent calls: kept, bounded, and carried by its checkpoints."""

from __future__ import annotations

from dista_runtime._execution import kept_answers
from dista_runtime._execution.kept_answers import KeptAnswers


def test_answers_round_trip_through_a_checkpoint() -> None:
    kept = KeptAnswers()
    assert kept.dump() == b""  # none: nothing to carry
    kept.keep(1, [b"one", memoryview(b"uno")])
    kept.keep(2, "ValueError: two")
    elsewhere = KeptAnswers()
    elsewhere.load(memoryview(kept.dump()))  # (a checkpoint's blob is a view of the file)
    assert elsewhere.get(1) == [b"one", b"uno"]
    assert elsewhere.get(2) == "ValueError: two"
    assert elsewhere.get(3) is None


def test_the_oldest_answers_go_past_the_bounds(monkeypatch: object) -> None:
    kept = KeptAnswers()
    for oid in range(kept_answers.ANSWERS_KEPT + 10):
        kept.keep(oid, [b"x"])
    assert len(kept) == kept_answers.ANSWERS_KEPT
    assert kept.get(0) is None and kept.get(kept_answers.ANSWERS_KEPT + 9) == [b"x"]
    big = KeptAnswers()
    half = kept_answers.ANSWER_BYTES_KEPT // 2 + 1
    big.keep(1, [b"a" * half])
    big.keep(2, [b"b" * half])  # the two together pass the byte bound: the first goes
    assert big.get(1) is None and big.get(2) is not None
