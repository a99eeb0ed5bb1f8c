"""Team A of tests/processes/test_attack_actors.py: its task module (its workers import it)
and its driver (``python -m tests.processes.support.team_a HOST:PORT``).

The driver makes an actor, bumps it to 42, passes its handle into a task (which bumps it to
43), prints the actor's ID and its pickled handle, waits while team B attacks, then prints
the actor's state: 43 if nothing of team B's reached it.
"""

from __future__ import annotations

import pickle
import sys

import dista_runtime as dista


@dista.actor
class Vault:
    def __init__(self) -> None:
        self.secret = 41

    def bump(self) -> int:
        self.secret += 1
        return self.secret

    def peek(self) -> int:
        return self.secret


@dista.task
def poke(vault: dista.ActorHandle[Vault]) -> int:
    """A handle passed into a task lets the task call the actor."""
    return vault.bump.remote().get(timeout=30)


def main(address: str) -> int:
    with dista.init(address=address):
        vault = Vault.remote()
        assert vault.bump.remote().get(timeout=30) == 42
        assert poke.remote(vault).get(timeout=30) == 43
        print("ACTOR", hex(vault.actor_id), pickle.dumps(vault).hex(), flush=True)
        sys.stdin.readline()  # team B attacks now
        print("STATE", vault.peek.remote().get(timeout=30), flush=True)
    return 0


if __name__ == "__main__":
    # By its module name, as team A's workers import it (in ``__main__`` its classes and
    # tasks would travel by value, and run only on workers of this driver's registry).
    from tests.processes.support import team_a  # noqa: PLW0406

    sys.exit(team_a.main(sys.argv[1]))
