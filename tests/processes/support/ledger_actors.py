"""The ledger actors of tests/processes/test_actor_exactly_once.py: importable, so the
`dista worker` processes and the driver processes of that test know them by name.

A ledger's one method that changes it is not commutative: `append` adds its argument at
the end of a list and answers the list's new length, so each answer names the place its
call took in the actor's order, and a call applied twice, lost or replayed out of order
shows both in the list and in answers that disagree with it. One class per checkpoint
cadence (``checkpoint_every`` belongs to the class).
"""

from __future__ import annotations

import os
from typing import Any

import dista_runtime as dista


class _Ledger:
    def __init__(self) -> None:
        self.entries: list[str] = []

    def append(self, item: str) -> int:
        self.entries.append(item)
        return len(self.entries)

    def entries_now(self) -> list[str]:
        return list(self.entries)

    def pid(self) -> int:
        return os.getpid()


@dista.actor
class LedgerNever(_Ledger):
    """No periodic checkpoint."""


@dista.actor(checkpoint_every=1000)
class LedgerEvery1000(_Ledger):
    """A checkpoint every 1,000 calls."""


@dista.actor(checkpoint_every=5)
class LedgerEvery5(_Ledger):
    """A checkpoint every 5 calls."""


#: The ledger class for each checkpoint cadence the test runs (``Any``: ``.remote`` is
#: added by the decorator, which the plugin types on the class, not on ``type[_Ledger]``).
BY_CADENCE: dict[int, Any] = {0: LedgerNever, 1000: LedgerEvery1000, 5: LedgerEvery5}
