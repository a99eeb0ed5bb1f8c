"""Team B of tests/processes/test_attack_actors.py, run as a script (``python -m
tests.processes.support.team_b HOST:PORT ACTOR HANDLE PATH``): its tasks are defined in
``__main__``, so they travel by value, and it imports none of team A's modules.

It runs script-defined tasks that say which team's worker they ran on and read ``PATH``
there; it calls and kills team A's actor by its ID alone, from its driver and from a task's
session; then it calls the actor through the handle team A gave out (pickled out of band).
It prints one JSON line of what it got.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from typing import Any

import dista_runtime as dista


def by_id(actor_id: int) -> dict[str, str]:
    """Call and kill an actor knowing only its ID: a handle built without its capability."""
    from dista_runtime._api.actor import ActorHandle
    from dista_runtime._values.ids import method_id

    methods = {"bump": (method_id("bump"), False), "peek": (method_id("peek"), False)}
    handle: ActorHandle[Any] = ActorHandle(actor_id, "team_a:Vault", methods, None)
    out = {}
    try:
        out["call"] = str(handle.bump.remote().get(timeout=10))
    except Exception as e:
        out["call"] = f"refused: {e}"
    handle.kill()
    return out


@dista.task
def where(path: str) -> tuple[str, int]:
    """Which team's worker runs this, and how much of ``path`` it read there."""
    try:
        with open(path, "rb") as f:
            size = len(f.read())
    except OSError:
        size = -1
    return os.environ.get("TEAM", "?"), size


@dista.task
def strike(actor_id: int) -> dict[str, str]:
    return by_id(actor_id)


def main(address: str, actor: str, handle: str, path: str) -> int:
    actor_id = int(actor, 16)
    with dista.init(address=address):
        ran = dista.get([where.remote(path) for _ in range(12)], timeout=30)
        from_task = strike.remote(actor_id).get(timeout=30)
        from_driver = by_id(actor_id)
        vault = pickle.loads(bytes.fromhex(handle))
        through_handle = vault.peek.remote().get(timeout=30)
    report = {
        "ran": ran,
        "task": from_task,
        "driver": from_driver,
        "handle": through_handle,
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
