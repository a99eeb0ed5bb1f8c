"""A driver of tests/processes/test_actor_exactly_once.py, as its own process:
``python -m tests.processes.support.ledger_driver HEAD ROLE NAME --out FILE ...``.

``owner`` creates the ledger actor (the class of ``--cadence``) and prints
``HOST <pid>`` (its worker's process ID), then ``HANDLE <hex>``: the pickled handle, which the test hands to the other drivers on their
standard input. ``caller`` (and ``leaver``, the same with few calls) reads that line first.
Each then makes ``--calls`` calls ``append("NAME:i")`` in batches of ``--batch`` (every
call of a batch sent, then each answer read), printing ``PROGRESS n`` after each batch
(n calls settled so far), then ``CALLED``. A batch's answers are waited for at most
``--batch-timeout`` seconds in all; what is still not answered then counts as failed.
The owner then waits for a line on its standard input and reads the ledger's entries.
Each prints ``READY`` once it can call, and calls once it reads ``GO`` (the owner after its
handle line), so that the drivers call at the same time. With ``--pause-at N`` it prints
``PAUSED`` once its first N calls are answered and waits for ``GO`` again (so that the test
can place another driver's calls there). ``--log-info`` logs INFO lines as well, each with
its level and logger's name (else only WARNING and above, bare, as a user's script).

Whatever happens, the driver writes ``--out``: a JSON object with ``answers`` (argument ->
the length its call answered), ``errors`` (argument -> why it has no answer), ``unmade``
(calls never sent: the run's ``--deadline`` passed) and, for the owner, ``entries`` (the
ledger's list, or null with ``entries_error``) and ``host`` (the process ID of the worker
hosting the ledger at the end), and exits 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import dista_runtime as dista
from tests.processes.support import ledger_actors as la


def _say(line: str) -> None:
    print(line, flush=True)


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _calls(handle: Any, args: argparse.Namespace, report: dict[str, Any], deadline: float) -> None:
    answers: dict[str, int] = report["answers"]
    errors: dict[str, str] = report["errors"]
    settled = 0
    for start in range(0, args.calls, args.batch):
        if time.monotonic() >= deadline:
            report["unmade"] = args.calls - start
            break
        batch: list[tuple[str, Any]] = []
        for i in range(start, min(start + args.batch, args.calls)):
            item = f"{args.name}:{i}"
            try:
                batch.append((item, handle.append.remote(item)))
            except Exception as e:
                errors[item] = _why(e)
        until = time.monotonic() + args.batch_timeout
        for item, ref in batch:
            try:
                answers[item] = ref.get(timeout=max(0.01, until - time.monotonic()))
            except Exception as e:
                errors[item] = _why(e)
        settled = len(answers) + len(errors)
        _say(f"PROGRESS {settled}")
        if start < args.pause_at <= start + args.batch:
            _say("PAUSED")  # the test runs another driver's calls here, then says GO
            if sys.stdin.readline().strip() != "GO":
                raise SystemExit("told to stop at the pause")
    _say("CALLED")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("head")
    parser.add_argument("role", choices=["owner", "caller", "leaver"])
    parser.add_argument("name")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cadence", type=int, default=0)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batch-timeout", type=float, default=15.0)
    parser.add_argument("--deadline", type=float, default=40.0)
    parser.add_argument("--pause-at", type=int, default=0)
    parser.add_argument("--log-info", action="store_true", help="log INFO lines too")
    args = parser.parse_args()
    if args.log_info:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    deadline = time.monotonic() + args.deadline
    report: dict[str, Any] = {"answers": {}, "errors": {}, "unmade": 0}
    try:
        with dista.init(args.head, timeout=20):
            if args.role == "owner":
                handle: Any = la.BY_CADENCE[args.cadence].remote()
                host = handle.pid.remote().get(timeout=20)  # it exists
                _say(f"HOST {host}")
                _say(f"HANDLE {pickle.dumps(handle).hex()}")
            else:
                line = sys.stdin.readline().split()
                assert line and line[0] == "HANDLE", f"expected a handle, read {line!r}"
                handle = pickle.loads(bytes.fromhex(line[1]))
            _say("READY")
            if sys.stdin.readline().strip() != "GO":  # every driver starts calling at once
                return 1
            _calls(handle, args, report, deadline)
            if args.role == "owner":
                sys.stdin.readline()  # the test says when every other driver is done
                try:
                    report["entries"] = handle.entries_now.remote().get(timeout=30)
                    report["host"] = handle.pid.remote().get(timeout=30)
                except Exception as e:
                    report["entries"], report["entries_error"] = None, _why(e)
    except BaseException as e:
        report["failed"] = _why(e)
        raise
    finally:
        args.out.write_text(json.dumps(report))
        _say("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
