"""The answers of an actor's recent calls, kept where a resent call finds them.

A caller whose answer was lost with a head (on its way when the head died) sends the call
again; the actor ran it already, so it is not run twice (its state has it) but answered
from here: by the worker where the actor lives on, or, restored elsewhere, from the
checkpoint, which carries the answers of the calls it covers (`dump`, `load`).

Bounded: the newest `ANSWERS_KEPT` answers or `ANSWER_BYTES_KEPT` bytes, the oldest
forgotten first. An answer is lost for good only if its caller did not get it while that
many later calls of the actor were answered.
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from dista_proto.frame import Bytes

__all__ = ["ANSWERS_KEPT", "ANSWER_BYTES_KEPT", "Answer", "KeptAnswers"]

ANSWERS_KEPT: Final = 4096
ANSWER_BYTES_KEPT: Final = 64 << 20

#: A call's answer: its encoded values, or the message it failed with.
Answer = Sequence[Bytes] | str


class KeptAnswers:
    """Recent calls' answers by call ID, oldest first, bounded (see the module docstring)."""

    def __init__(self) -> None:
        self._answers: OrderedDict[int, tuple[int, Answer]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, oid: int) -> Answer | None:
        kept = self._answers.get(oid)
        return None if kept is None else kept[1]

    def keep(self, oid: int, answer: Answer) -> None:
        size = len(answer) if isinstance(answer, str) else sum(len(v) for v in answer)
        answers = self._answers
        old = answers.pop(oid, None)
        if old is not None:
            self._bytes -= old[0]
        answers[oid] = (size, answer)
        self._bytes += size
        while answers and (len(answers) > ANSWERS_KEPT or self._bytes > ANSWER_BYTES_KEPT):
            self._bytes -= answers.popitem(last=False)[1][0]

    def dump(self) -> bytes:
        """Every kept answer, for a checkpoint (it covers every call run so far)."""
        plain = {
            oid: answer if isinstance(answer, str) else [bytes(v) for v in answer]
            for oid, (_, answer) in self._answers.items()
        }
        return pickle.dumps(plain, protocol=5) if plain else b""

    def load(self, blob: Bytes) -> None:
        """The answers a checkpoint carried, kept as if this worker had given them."""
        if not len(blob):
            return
        for oid, answer in pickle.loads(blob).items():
            self.keep(int(oid), answer)
