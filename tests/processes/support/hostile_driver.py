"""The well-behaved driver that runs while hostile peers attack (`python -m
tests.processes.support.hostile_driver HEAD_ADDRESS`): rounds of small tasks, a task-after chain, a
1 MiB stored result fetched from its worker's object server, and calls to an actor, each
result checked against the value it must have.

It prints one JSON object a line on stdout: first what an attacker would aim at (its driver
number, and two objects it keeps for the whole run: a small result the head holds and a
1 MiB one a worker stores, and one it never reads or passes on), then one line per round (``checked``, ``wrong``, ``lost`` and
what went wrong), and ``{"done": ...}`` once stdin closes (its parent's way to say stop).
The two kept objects are read again every round: a hostile release, cancel or forged
answer that reached them shows as a wrong or lost result.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import dista_runtime as dista
from dista_proto import driver_number
from tests.processes.support import hostile_tasks as ht

#: How long one result may take under attack before it counts as lost.
GET_TIMEOUT = 60.0
SMALL_TASKS = 40
CHAIN = 10
ACTOR_CALLS = 5


def chain_value(links: int) -> int:
    x = (1 * 31 + 0) % 1_000_000_007
    for k in range(1, links + 1):
        x = (x * 31 + k) % 1_000_000_007
    return x


class Checker:
    """Counts of one round's results: right, wrong, lost (raised or timed out)."""

    def __init__(self) -> None:
        self.checked = self.wrong = self.lost = 0
        self.problems: list[str] = []

    def expect(self, what: str, ref: dista.ObjectRef[Any], want: Any) -> None:
        try:
            got = ref.get(timeout=GET_TIMEOUT)
        except Exception as e:
            self.lost += 1
            self.problems.append(f"{what}: {type(e).__name__}: {e}"[:300])
            return
        self.checked += 1
        if got != want:
            self.wrong += 1
            shown = got if not isinstance(got, bytes) else f"{len(got)} bytes {ht.digest(got)}"
            self.problems.append(f"{what}: got {shown!r}"[:300])


def one_round(
    r: int, pinned_small: Any, pinned_blob: Any, tally: Any, total: list[int]
) -> Checker:
    c = Checker()
    adds = [ht.add.remote(i, r) for i in range(SMALL_TASKS)]
    x = ht.step.remote(1, 0)
    for k in range(1, CHAIN + 1):
        x = ht.step.remote(x, k)  # a task-after on the link before
    seed = 1000 + r
    big = ht.blob.remote(seed)
    summary = ht.summarize.remote(big)
    kept_small = ht.add.remote(pinned_small, r)
    kept_blob = ht.summarize.remote(pinned_blob)
    calls = []
    for k in range(1, ACTOR_CALLS + 1):
        total[0] += k
        calls.append((tally.add.remote(k), total[0]))
    for i, ref in enumerate(adds):
        c.expect(f"add({i}, {r})", ref, i + r)
    c.expect("chain", x, chain_value(CHAIN))
    c.expect("blob summary", summary, (ht.BLOB, ht.digest(ht.blob_bytes(seed))))
    c.expect("blob fetched", big, ht.blob_bytes(seed))
    c.expect("kept small + r", kept_small, 1001 + r)
    c.expect("kept blob summary", kept_blob, (ht.BLOB, ht.digest(ht.blob_bytes(7))))
    for ref, want in calls:
        c.expect("tally", ref, want)
    # Take this round's timeline records: the head keeps up to 100,000 finished tasks for
    # their driver (about 45 MiB here), which would otherwise fill during a run and count
    # as the attack's memory.
    dista.timeline()
    return c


def main(address: str) -> int:
    stop = threading.Event()

    def wait_for_eof() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    with dista.init(address):
        pinned_small = ht.add.remote(1000, 1)
        pinned_blob = ht.blob.remote(7)
        secret = ht.blob.remote(9)  # stored, never read nor passed on: fetched by nobody
        tally = ht.Tally.remote()
        pinned_small.get(timeout=GET_TIMEOUT)
        ht.summarize.remote(pinned_blob).get(timeout=GET_TIMEOUT)  # stored, then kept
        number = driver_number(pinned_small.object_id)
        line = {
            "number": number,
            "pinned": [pinned_small.object_id, pinned_blob.object_id],
            "secret": secret.object_id,
            "actor": tally.actor_id,
        }
        print(json.dumps(line), flush=True)
        total = [0]
        r = 0
        rounds = checked = wrong = lost = 0
        while not stop.is_set():
            r += 1
            began = time.monotonic()
            c = one_round(r, pinned_small, pinned_blob, tally, total)
            rounds += 1
            checked, wrong, lost = checked + c.checked, wrong + c.wrong, lost + c.lost
            out: dict[str, Any] = {"round": r, "checked": c.checked, "wrong": c.wrong}
            out["lost"] = c.lost
            out["seconds"] = round(time.monotonic() - began, 3)
            if c.problems:
                out["problems"] = c.problems[:10]
            print(json.dumps(out), flush=True)
        summary: dict[str, Any] = {"done": True, "rounds": rounds, "checked": checked}
        summary.update(wrong=wrong, lost=lost)
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
