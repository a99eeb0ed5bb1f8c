"""``dista status``, ``dista timeline`` and ``dista stop``: an observer's one question.

Each connects to the head as an observer, asks once (`dp.Status`, `dp.Timeline` or
`dp.Stop`) within ``--timeout`` seconds and prints the answer on stdout; a head it cannot
reach is one plain line on stderr and exit 1 (`report` says why it is no log line).
``timeline`` prints a table of every driver's finished tasks, named as the drivers told the
head (labels, Dista's kind 42) or by the ``--import`` modules, or writes a Chrome trace with
``-o``.
"""

from __future__ import annotations

import argparse

import dista_proto as dp
from dista_proto.frame import MAX_LABELS

from .flags import report
from .process import import_tasks, run_role

__all__ = ["cmd_status", "cmd_stop", "cmd_timeline"]


def _ask(
    args: argparse.Namespace, request: dp.Status | dp.Timeline | dp.Stop | dp.Labels
) -> object:
    from .._hosts.observer import ask

    host, port = args.head
    return run_role(args, lambda loop: ask(loop, host, port, request, args.timeout))


def cmd_status(args: argparse.Namespace) -> int:
    """Print the head's status text."""
    try:
        answer = _ask(args, dp.Status())
    except ConnectionError as e:
        report(args, f"dista status: {e}")
        return 1
    assert isinstance(answer, dp.Status)
    print(answer.text)
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    """Print every driver's finished tasks, or write them as a Chrome trace."""
    from .._api.trace import task_label

    try:
        import_tasks(args.imports)  # their tasks get names instead of hashes
    except Exception as e:
        report(args, f"dista timeline: cannot import the task modules: {e!r}")
        return 2
    try:
        answer = _ask(args, dp.Timeline())
    except ConnectionError as e:
        report(args, f"dista timeline: {e}")
        return 1
    assert isinstance(answer, dp.Timeline)
    records = answer.records or ()
    known = _labels(args)  # what the drivers call their tasks
    labels = {
        r.task_id: known.get(r.task_id & dp.TASK_ID_MASK) or task_label(r.task_id) for r in records
    }
    if args.output:
        from .._api.trace import write_chrome_trace

        events = write_chrome_trace(records, args.output, labels)
        print(
            f"wrote {len(records)} tasks ({events} trace events) to {args.output}; "
            "open it in https://ui.perfetto.dev or chrome://tracing"
        )
        return 0
    width = max([18, *map(len, labels.values())])
    print(f"{'object':>18} {'task':<{width}} {'queued ms':>10} {'run ms':>9}  worker")
    for r in records:
        queued = (r.dispatched - r.submitted) / 1e6 if r.dispatched and r.submitted else 0.0
        ran = (r.ended - r.started) / 1e6 if r.ended and r.started else 0.0
        where = f"{r.address.host}:{r.address.port}"
        label = labels[r.task_id]
        print(f"{r.object_id:#18x} {label:<{width}} {queued:10.3f} {ran:9.3f}  {where}")
    print(f"{len(records)} finished tasks")
    return 0


def _labels(args: argparse.Namespace) -> dict[int, str]:
    """Every label the head knows (Dista's kind 42), asked a page at a time."""
    known: dict[int, str] = {}
    while True:
        answer = _ask(args, dp.Labels(start=len(known)))
        assert isinstance(answer, dp.Labels)
        known.update(answer.entries)
        if len(answer.entries) < MAX_LABELS:
            return known


def cmd_stop(args: argparse.Namespace) -> int:
    """Ask the head to stop, with its workers."""
    try:
        _ask(args, dp.Stop())
    except ConnectionError as e:
        report(args, f"dista stop: {e}")
        return 1
    print(f"asked the head at {args.head[0]}:{args.head[1]} to stop")
    return 0
