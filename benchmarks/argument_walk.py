"""The walk of one argument: which Dista modules run while a task's argument is carried from
``f.remote()`` to the user function, in the driver, the head and the worker.

Run it from a checkout (any commit with ``dista_runtime.cli.main``)::

    python benchmarks/argument_walk.py [--checkout PATH] [--runs 5]

It starts three processes on loopback, each with the checkout first on ``PYTHONPATH`` and a
tracer (`sys.setprofile` and `threading.setprofile`) installed before Dista is imported:
``dista head``, ``dista worker`` (one process, one thread) and a driver that joins them with
``dista_runtime.init(address)`` and calls ``walk_target.remote(marker)`` ``--runs`` times,
each with a fresh 32-byte marker, waiting for each result and letting the cluster go quiet
(0.3 s) before the next. The task is importable, so it travels by name (the common path).

Two counts are printed. The walk proper (the modules the argument *crosses*) counts a
module when a function of it is handed the argument: a call whose parameters hold the
marker (as bytes, a view, a sequence of them, or a field of a core's event or decision).
The wider count is every module of ``dista_proto``, ``dista_runtime`` and the bindings
whose Python code runs while the marker is being carried (bookkeeping the argument does not
pass through included). The windows, per process:

- driver: from the first call that holds the marker (``RemoteFunction.remote``'s
  arguments) until bytes holding it are handed to the transport (a call of a ``write``,
  ``writelines``, ``send``, ``sendall`` or ``sendmsg`` outside Dista, made from Dista code);
- head: from its read of the submit bytes (the first Dista call holding the marker, with
  the Dista frames under it on the stack: the binding's read callback and what it called)
  until bytes holding the marker are handed to the transport toward the worker;
- worker: from its read of the run bytes (as for the head) until the user function's first
  line (its ``call`` event).

Excluding unrelated work: the cluster is otherwise idle (one driver, one worker, nothing
else submitted, a quiet pause before each argument), and inside the window each call is
assigned to an *episode*, the outermost frame on its thread that began inside the window
(one loop callback, one runner-thread job, the ``remote`` call itself). Only episodes in
which some Dista call's arguments hold the marker count: a timer, a liveness ping, a write
on another link or a collector callback that runs meanwhile does not hold the argument and
is left out (their number is printed). The first argument warms up caches and imports and is
not counted; a module counts when it is on the path of every later argument (the modules
seen in only some are printed apart).

The tracer slows each process several times; only which modules run is measured, not time.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve()
DISTA = ("dista_proto", "dista_runtime", "dista_asyncio", "dista_anyio", "dista_gevent")
WRITES = {"write", "writelines", "send", "sendall", "sendmsg"}
TASKS = '''"""The task the walk carries an argument to."""

import dista_runtime as dista


@dista.task
def walk_target(data: bytes) -> int:
    return len(data)
'''


# -- the tracer (runs inside each traced process) ---------------------------------------------


def _holds(value: object, marker: bytes, depth: int = 0) -> bool:
    """Whether ``value`` (bytes, a view, or a sequence of them) holds ``marker``."""
    if isinstance(value, (bytes, bytearray)):
        return marker in value
    if isinstance(value, memoryview):
        return value.nbytes < 1 << 24 and marker in value.tobytes()
    if depth < 2 and isinstance(value, (list, tuple)):
        return any(_holds(v, marker, depth + 1) for v in value[:64])
    if depth < 2 and isinstance(value, dict):
        return any(_holds(v, marker, depth + 1) for v in list(value.values())[:64])
    if depth < 2 and type(value).__module__.split(".")[0] == "dista_proto":
        # A core's event, decision or record (a Task, a RunTask, a Write, the head's
        # TaskRecord holding its Task): their fields, two levels down.
        fields = getattr(type(value), "__slots__", None) or getattr(value, "__dict__", {})
        return any(_holds(getattr(value, f, None), marker, depth + 1) for f in fields)
    return False


def _module(frame: FrameType) -> str | None:
    """The Dista module ``frame`` runs in, or None."""
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) and name.split(".")[0] in DISTA else None


class Walk:
    """The tracer of one process: one window per marker, in the order given."""

    def __init__(self, role: str, markers: list[bytes], out: Path) -> None:
        self.role = role
        self.markers = markers
        self.out = out
        self.lock = threading.Lock()
        self.walks: list[dict[str, Any]] = []
        self._reset()

    def _reset(self) -> None:
        self.open = False
        self.in_window: dict[int, FrameType] = {}  # frames begun in the window, by id
        self.episodes: dict[int, dict[str, Any]] = {}  # by the id of their root frame
        self.order = 0

    @property
    def marker(self) -> bytes | None:
        return self.markers[len(self.walks)] if len(self.walks) < len(self.markers) else None

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event not in ("call", "c_call"):
            return
        marker = self.marker
        if marker is None:
            return
        with self.lock:
            if event == "c_call":
                if self.open and self.role != "worker":
                    self._maybe_write(frame, getattr(arg, "__name__", ""), marker, frame)
                return
            module = _module(frame)
            if module is None:
                if not self.open:
                    return
                caller = frame.f_back
                if self.role == "worker" and frame.f_code.co_name == "walk_target":
                    self._close()
                elif caller is not None and self.role != "worker":
                    self._maybe_write(caller, frame.f_code.co_name, marker, frame)
                return
            holds = any(_holds(v, marker) for v in frame.f_locals.values())
            if not self.open:
                if not holds:
                    return
                self.open = True
                # The read that brought the marker: the Dista frames under this one.
                chain = []
                f: FrameType | None = frame
                while f is not None and _module(f) is not None:
                    chain.append(f)
                    f = f.f_back
                for f in reversed(chain):
                    self._enter(f, _module(f) or "", True)
                return
            self._enter(frame, module, holds)

    def _enter(self, frame: FrameType, module: str, holds: bool) -> None:
        self.in_window[id(frame)] = frame
        root = frame
        while root.f_back is not None and id(root.f_back) in self.in_window:
            root = root.f_back
        episode = self.episodes.setdefault(id(root), {"holds": False, "modules": {}, "handed": {}})
        episode["holds"] = episode["holds"] or holds
        self.order += 1
        episode["modules"].setdefault(module, self.order)
        if holds:  # this function was handed the argument (or bytes holding it)
            episode["handed"].setdefault(module, self.order)

    def _maybe_write(self, caller: FrameType, name: str, marker: bytes, frame: FrameType) -> None:
        """A call out of Dista that hands bytes holding the marker to the transport."""
        if name not in WRITES or _module(caller) is None:
            return
        here = frame.f_locals.values() if frame is not caller else ()
        if any(_holds(v, marker) for v in here) or any(
            _holds(v, marker) for v in caller.f_locals.values()
        ):
            self._close()

    def _close(self) -> None:
        first: dict[str, int] = {}
        handed: dict[str, int] = {}
        left_out = 0
        for episode in self.episodes.values():
            if not episode["holds"]:
                left_out += 1
                continue
            for module, order in episode["modules"].items():
                first[module] = min(order, first.get(module, order))
            for module, order in episode["handed"].items():
                handed[module] = min(order, handed.get(module, order))
        self.walks.append(
            {
                "modules": sorted(first, key=first.__getitem__),
                "handed": sorted(handed, key=handed.__getitem__),
                "left_out": left_out,
            }
        )
        self._reset()
        self.out.write_text(json.dumps(self.walks))


def serve(role: str, argv: list[str]) -> None:
    """Run one traced process: ``dista head|worker ...`` or the driver."""
    markers = [bytes.fromhex(m) for m in os.environ["WALK_MARKERS"].split(",")]
    walk = Walk(role, markers, Path(os.environ["WALK_OUT"]) / f"{role}.json")
    threading.setprofile(walk.profile)
    sys.setprofile(walk.profile)
    if role == "driver":
        drive(argv[0], markers)
    else:
        from dista_runtime.cli import main

        sys.exit(main([role, *argv]))


def drive(address: str, markers: list[bytes]) -> None:
    import walk_tasks

    import dista_runtime as dista

    with dista.init(address, timeout=30):
        for marker in markers:
            time.sleep(0.3)  # let the cluster go quiet
            assert walk_tasks.walk_target.remote(marker).get(timeout=30) == len(marker)
        time.sleep(0.3)


# -- the orchestrator -------------------------------------------------------------------------


def measure(checkout: Path, runs: int) -> dict[str, list[dict[str, Any]]]:
    markers = ",".join(secrets.token_hex(16) for _ in range(runs + 1))
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        (where / "walk_tasks.py").write_text(TASKS)
        path = [str(checkout), str(checkout / "bindings"), str(where)]
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(path),
            WALK_MARKERS=markers,
            WALK_OUT=tmp,
            PYTHONHASHSEED="0",
        )
        port = str(7600 + secrets.randbelow(300))
        address = f"127.0.0.1:{port}"

        def start(role: str, *args: str) -> subprocess.Popen[bytes]:
            command = [sys.executable, str(HERE), "--serve", role, *args]
            return subprocess.Popen(command, env=env, cwd=tmp)

        head = start("head", "--port", port)
        time.sleep(1.5)
        worker = start("worker", "--head", address, "--import", "walk_tasks")
        try:
            driver = start("driver", address)
            if driver.wait(timeout=300) != 0:
                raise SystemExit("the driver failed")
            time.sleep(0.5)
        finally:
            for process in (worker, head):
                process.terminate()
            for process in (worker, head):
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        found = {}
        for role in ("driver", "head", "worker"):
            file = where / f"{role}.json"
            found[role] = json.loads(file.read_text()) if file.exists() else []
        return found


def report(found: dict[str, list[dict[str, Any]]], runs: int) -> None:
    for key, what in (
        ("modules", "run while the argument is carried"),
        ("handed", "handed the argument (a function of theirs gets it, or bytes holding it)"),
    ):
        print(f"-- modules that {what}")
        everywhere: set[str] = set()
        for role in ("driver", "head", "worker"):
            walks = found[role][1:]  # the first argument warmed up
            if len(walks) < runs:
                print(f"{role}: only {len(walks)} of {runs} walks were seen")
                continue
            common = set.intersection(*(set(w[key]) for w in walks))
            sometimes = set().union(*(set(w[key]) for w in walks)) - common
            ordered = [m for m in walks[-1][key] if m in common]
            left_out = [w["left_out"] for w in walks]
            print(f"{role}: {len(ordered)} modules (episodes left out per argument: {left_out})")
            for n, module in enumerate(ordered, 1):
                print(f"  {n:2}. {module}")
            if sometimes:
                print(f"  on some arguments' path only: {', '.join(sorted(sometimes))}")
            everywhere |= common
        core = sum(1 for m in everywhere if m.startswith("dista_proto"))
        print(
            f"distinct Dista modules that {key.replace('modules', 'run')}, all processes: "
            f"{len(everywhere)} ({core} of dista_proto, {len(everywhere) - core} of the "
            "runtime and bindings)\n"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--checkout", type=Path, default=HERE.parent.parent)
    parser.add_argument("--runs", type=int, default=5, help="arguments counted (after 1 warm-up)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.serve:
        serve(args.serve, rest)
        return
    checkout = args.checkout.resolve()
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(f"the walk of one argument, checkout at {commit or checkout.name}, {args.runs} runs")
    report(measure(checkout, args.runs), args.runs)


if __name__ == "__main__":
    main()
