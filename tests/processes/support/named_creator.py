"""A driver process that creates the named actor "ledger" (a `Recorder`), says "ready",
then waits for a line on stdin and leaves cleanly (tests/processes/test_named_actors.py).
Its arguments: the head's address, then the modules workers import (its registry)."""

from __future__ import annotations

import importlib
import sys

import dista_runtime as dista
from tests.processes.support import recovery_tasks as rt


def main() -> None:
    address, imports = sys.argv[1], sys.argv[2]
    for module in imports.split(","):
        importlib.import_module(module)
    with dista.init(address):
        ledger = rt.Recorder.options(name="ledger").remote("ledger")
        print("first", ledger.record.remote("a").get(timeout=30), flush=True)
        print("ready", flush=True)
        sys.stdin.readline()
        print("left", flush=True)


if __name__ == "__main__":
    main()
