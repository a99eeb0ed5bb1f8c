"""Side by side: Dista against Ray, Dask distributed and ProcessPoolExecutor.

``python -m benchmarks --help`` runs it (see ``benchmarks/__main__.py``). The parent process
never imports a system: for every round, every group of workloads and every system it starts
one child process (``python -m benchmarks --child SYSTEM --group GROUP``) that starts that
system's local cluster with 2 worker processes, runs the group's workloads and writes their
results to a JSON file, which it rewrites after each workload so that a timeout keeps what
was already measured. A child that outlives its timeout is killed together with every
process of its session (the cluster it started). Systems alternate within each round
(dista, ray, dask, ppe; then again), so slow drift of the machine spreads over all of them.

What each workload measures (``WORKLOADS`` below has the units):

- start: from the call that starts the local cluster to the first task's result (the
  system's import is done before the clock starts). idle_mem: right after that, and a
  ``SETTLE_S`` pause, the resident memory (RSS) of the driver process plus every process
  descended from it (plus ``engine.pids()``), in MiB. RSS counts shared pages once per
  process; the JSON also holds the proportional set size (PSS) where psutil can read it.
- noop: submit every no-op task, then get every result. roundtrip: one submit and get at a
  time; the median of the round trips. chain: each task takes the previous one's ref as an
  argument; ProcessPoolExecutor has no refs, so its driver waits on each result and passes
  the value on. fanin: that many tasks, all of whose results are the arguments of one task
  that sums them; the time to that sum.
- actor: calls to one actor's method, all submitted, then all results read.
- actor_roundtrip: one call to an actor's method and the read of its result at a time;
  the median. actor_task_roundtrip: the same system's no-op task round trip, measured in
  the same probe in alternating blocks of 100 with the actor calls (so both see the same
  machine; the actor holds one of the two workers meanwhile). actor_vs_task: the task's
  median over the actor call's (> 1: an actor call's round trip is the faster).
- checkpoint (Dista only: Ray has no actor checkpoints, Dask and ProcessPoolExecutor no
  actors): an actor holding that many bytes of state in a NumPy array (pickled out of
  band), checkpointed with ``handle.checkpoint()`` into a ``file://`` store in a temporary
  directory on this machine's disk (the parent makes it under the system's temporary
  directory, names it in ``DISTA_CHECKPOINT_URI`` for the child and its workers, and
  removes it). The time is from the call to its return (the worker has pickled the state,
  written it, fsynced and renamed it, and removed the previous checkpoint), in MB/s (1e6
  bytes). checkpoint_bytes: the same with the state a ``bytes`` object (pickled in band).
  References in the same directory, interleaved with the checkpoints: checkpoint_cp is
  ``cp`` of a file of that size (no fsync: it may end in the page cache),
  checkpoint_cp_sync the same ``cp`` and then ``sync FILE`` (an fsync),
  checkpoint_write_fsync one ``f.write`` of the bytes and ``os.fsync``. checkpoint_vs_cp
  and checkpoint_vs_cp_sync are the NumPy checkpoint's speed over those (1 = as fast).
  Every timed write starts after an ``os.sync()``, so that none pays for another's dirty
  pages. restore: the worker hosting the actor is killed with SIGKILL (its PID from an
  actor method), and the clock runs from the kill until the next call to the actor
  answers (the head notices the loss, restores the actor on the other worker from the
  newest checkpoint, which covers every call, so nothing is replayed, and runs the call),
  in MB/s of state; restore_bytes for the ``bytes`` state. The spare worker has imported
  NumPy before the kill (a small task: only it can run one), so NumPy's first import
  (about 60 ms here) is not counted. References: restore_read reads the checkpoint file
  into a fresh ``bytes`` in Python (as the worker does), restore_cat runs ``cat FILE >
  /dev/null``; both read from the page cache, as the restore does. restore_vs_read is the
  NumPy restore's speed over the Python read. Each round takes the median of 5 checkpoints
  and 2 restores of each kind (a restore waits for the replacement of the worker killed
  before).
- big256, big1g: a task builds ``bytes`` of that size on a worker and the driver reads it.
  Where a system can wait for a task to finish without fetching its value (Ray
  ``ray.wait``, Dask ``distributed.wait``), only the get is timed ("get after finish");
  elsewhere the time of the whole task minus the time of a task that builds the same bytes
  but returns only their length ("total minus baseline"). The JSON says which. Every
  system's total-minus-baseline figure is in the JSON too (``minus_baseline_gbps``) and
  printed under the table, for a like-for-like comparison. GB is 1e9.
- numpy_arg: a float64 array of that many bytes made in the driver, passed to a task that
  returns its sum, timed from submit to the value. Dask uses ``client.scatter`` first (its
  documented way of passing large data; the scatter is timed too).
- bytes256, bytes1g, np256, np1g: a task builds a result of that size on a worker (``bytes``,
  or a NumPy uint8 array) and the driver gets it, timed from submit to the value in the
  driver (median of 3), in GB/s. np1g_get: a 1 GiB NumPy result already finished on its
  worker, the get alone, in ms (median of 3): where the driver maps the worker's memory
  (Ray's object store, Dista's memory files on one host), a fraction of a millisecond;
  where it copies, most of a second. Not applicable where a system cannot wait for a task
  without fetching its value.
- queued: submit every no-op task as fast as possible (most are queued at the end), then get
  them all. queued_mem is the growth of the same RSS sum as idle_mem from before the first
  submit to after the last; queued_submit and queued_drain time the two halves.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from importlib import import_module, metadata, util
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2
SETTLE_S = 1.0
MIB = 1 << 20
GB = 1e9

DEFAULT_SYSTEMS = ("dista", "ray", "dask", "ppe")
#: Dista on its other bindings (``dista`` is asyncio): named with --systems, compared with
#: asyncio's Dista as the peers are (a ratio > 1 means asyncio is ahead).
BINDINGS = ("dista-anyio", "dista-trio", "dista-gevent")
SYSTEMS = DEFAULT_SYSTEMS + BINDINGS
PEERS = SYSTEMS[1:]
#: where each system's engine class lives, and the module whose absence means "not installed"
ENGINES = {
    "dista": ("benchmarks.workloads_dista", "DistaEngine", "dista_runtime"),
    "ray": ("benchmarks.workloads_peers", "RayEngine", "ray"),
    "dask": ("benchmarks.workloads_peers", "DaskEngine", "distributed"),
    "ppe": ("benchmarks.workloads_peers", "PoolEngine", "concurrent.futures"),
    "dista-anyio": ("benchmarks.workloads_dista", "DistaAnyioEngine", "anyio"),
    "dista-trio": ("benchmarks.workloads_dista", "DistaTrioEngine", "trio"),
    "dista-gevent": ("benchmarks.workloads_dista", "DistaGeventEngine", "gevent"),
}
#: distributions whose versions the JSON records
DISTRIBUTIONS = ("dista", "ray", "dask", "distributed", "numpy", "psutil", "matplotlib")

OK = "ok"
NOT_APPLICABLE = "n/a"
ERROR = "error"
TIMEOUT = "timeout"
NOT_INSTALLED = "not installed"
UNAVAILABLE = "unavailable"
#: a child reporting one of these for a system means: do not start that system again
FINAL_STATUSES = frozenset({NOT_INSTALLED, UNAVAILABLE})


class Unavailable(Exception):
    """The system is installed but cannot run yet (say, an API still being written)."""


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    name: str
    probe: str  # the measurement that produces it (one probe may produce several workloads)
    unit: str
    higher_is_better: bool
    #: False for references (cp, a read) and ratios measured inside a probe: no system
    #: is compared with another on these
    compared: bool = True


WORKLOADS: tuple[Workload, ...] = (
    Workload("start", "startup", "s", False),
    Workload("idle_mem", "startup", "MiB", False),
    Workload("noop", "noop", "tasks/s", True),
    Workload("roundtrip", "roundtrip", "µs", False),
    Workload("chain", "chain", "tasks/s", True),
    Workload("fanin", "fanin", "s", False),
    Workload("actor", "actor", "calls/s", True),
    Workload("actor_roundtrip", "actor_roundtrip", "µs", False),
    Workload("actor_task_roundtrip", "actor_roundtrip", "µs", False),
    Workload("actor_vs_task", "actor_roundtrip", "x", True, compared=False),
    Workload("checkpoint", "checkpoint", "MB/s", True),
    Workload("checkpoint_bytes", "checkpoint", "MB/s", True),
    Workload("checkpoint_cp", "checkpoint", "MB/s", True, compared=False),
    Workload("checkpoint_cp_sync", "checkpoint", "MB/s", True, compared=False),
    Workload("checkpoint_write_fsync", "checkpoint", "MB/s", True, compared=False),
    Workload("checkpoint_vs_cp", "checkpoint", "x", True, compared=False),
    Workload("checkpoint_vs_cp_sync", "checkpoint", "x", True, compared=False),
    Workload("restore", "checkpoint", "MB/s", True),
    Workload("restore_bytes", "checkpoint", "MB/s", True),
    Workload("restore_read", "checkpoint", "MB/s", True, compared=False),
    Workload("restore_cat", "checkpoint", "MB/s", True, compared=False),
    Workload("restore_vs_read", "checkpoint", "x", True, compared=False),
    Workload("big256", "big256", "GB/s", True),
    Workload("big1g", "big1g", "GB/s", True),
    Workload("numpy_arg", "numpy_arg", "s", False),
    Workload("bytes256", "large", "GB/s", True),
    Workload("bytes1g", "large", "GB/s", True),
    Workload("np256", "large", "GB/s", True),
    Workload("np1g", "large", "GB/s", True),
    Workload("np1g_get", "large", "ms", False),
    Workload("queued_mem", "queued", "MiB", False),
    Workload("queued_submit", "queued", "s", False),
    Workload("queued_drain", "queued", "s", False),
)
BY_NAME = {w.name: w for w in WORKLOADS}
#: probe -> group; a group is what one child process runs on one cluster
PROBE_GROUP = {
    "startup": "startup",
    "noop": "tasks",
    "roundtrip": "tasks",
    "chain": "tasks",
    "fanin": "tasks",
    "actor": "tasks",
    "actor_roundtrip": "tasks",
    "big256": "data",
    "big1g": "data",
    "numpy_arg": "data",
    "large": "data",
    "queued": "queued",
    "checkpoint": "checkpoint",
}
GROUPS = ("startup", "tasks", "data", "checkpoint", "queued")
OPT_IN_PROBES = frozenset({"queued"})
GROUP_TIMEOUT_S = {
    "startup": 180.0,
    "tasks": 600.0,
    "data": 600.0,
    "checkpoint": 300.0,
    "queued": 3600.0,
}
#: probes only some systems can run, and why the others cannot: those get "n/a" without a
#: child process (a cluster started for nothing)
DISTA_SYSTEMS = ("dista", *BINDINGS)
PROBE_SYSTEMS: dict[str, tuple[frozenset[str], dict[str, str]]] = {
    "checkpoint": (
        frozenset(DISTA_SYSTEMS),
        {
            "ray": "Ray has no actor checkpoints",
            "dask": "Dask's actors have no checkpoints",
            "ppe": "ProcessPoolExecutor has no actors",
        },
    ),
}
#: the environment variable naming Dista's checkpoint store (dista_runtime._execution.checkpoints.ENV;
#: the parent never imports a system)
CHECKPOINT_ENV = "DISTA_CHECKPOINT_URI"


@dataclass(frozen=True)
class Sizes:
    noop: int = 10_000
    roundtrip: int = 1_000
    chain: int = 2_000
    fanin: int = 1_000
    actor: int = 10_000
    actor_roundtrip: int = 1_000
    checkpoint: int = 100 * MIB
    big256: int = 256 * MIB
    big1g: int = 1024 * MIB
    numpy_arg: int = 100_000_000
    queued: int = 1_000_000


FULL = Sizes()
QUICK = Sizes(
    noop=1_000,
    roundtrip=100,
    chain=200,
    fanin=100,
    actor=1_000,
    actor_roundtrip=100,
    checkpoint=10 * MIB,
    big256=32 * MIB,
    big1g=128 * MIB,
    numpy_arg=10_000_000,
    queued=100_000,
)


def select_workloads(only: Sequence[str] | None) -> list[Workload]:
    """The workloads named (or whose probe is named); by default all but the opt-in ones."""
    if not only:
        return [w for w in WORKLOADS if w.probe not in OPT_IN_PROBES]
    unknown = [n for n in only if n not in BY_NAME and n not in PROBE_GROUP]
    if unknown:
        raise ValueError(f"unknown workload(s): {', '.join(unknown)}")
    return [w for w in WORKLOADS if w.name in only or w.probe in only]


def groups_of(workloads: Iterable[Workload]) -> list[str]:
    wanted = {PROBE_GROUP[w.probe] for w in workloads}
    return [g for g in GROUPS if g in wanted]


def unsupported(system: str, name: str) -> str | None:
    """Why `system` cannot run workload `name`, or None when it can (as far as known
    before starting it)."""
    found = PROBE_SYSTEMS.get(BY_NAME[name].probe)
    if found is None or system in found[0]:
        return None
    return found[1].get(system, f"{system} cannot run {name}")


# --------------------------------------------------------------------------- results


@dataclass
class Result:
    system: str
    workload: str
    round: int
    status: str
    value: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class Cell:
    """One system's summary for one workload."""

    median: float | None
    runs: int  # how many rounds gave a value
    status: str  # OK when median is set, else the most common status


def summarize(results: Iterable[Result]) -> dict[str, dict[str, Cell]]:
    """workload -> system -> Cell: the median of the rounds that gave a value."""
    grouped: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        grouped.setdefault((r.workload, r.system), []).append(r)
    summary: dict[str, dict[str, Cell]] = {}
    for (workload, system), rs in grouped.items():
        summary.setdefault(workload, {})[system] = cell_of(rs)
    return summary


def cell_of(results: Sequence[Result]) -> Cell:
    values = [r.value for r in results if r.status == OK and r.value is not None]
    if values:
        return Cell(statistics.median(values), len(values), OK)
    statuses = [r.status for r in results]
    return Cell(None, 0, max(set(statuses), key=statuses.count) if statuses else ERROR)


def ratio(dista: float | None, peer: float | None, higher_is_better: bool) -> float | None:
    """Dista against a peer, oriented so that > 1 means Dista is better."""
    if dista is None or peer is None or dista <= 0 or peer <= 0:
        return None
    return dista / peer if higher_is_better else peer / dista


def ratios(
    summary: dict[str, dict[str, Cell]], peers: Sequence[str]
) -> dict[str, dict[str, float]]:
    """workload -> peer -> Dista's ratio, for every pair that has both medians."""
    out: dict[str, dict[str, float]] = {}
    for name, cells in summary.items():
        dista = cells.get("dista")
        if not BY_NAME[name].compared:
            continue
        for peer in peers:
            other = cells.get(peer)
            if dista is None or other is None:
                continue
            r = ratio(dista.median, other.median, BY_NAME[name].higher_is_better)
            if r is not None:
                out.setdefault(name, {})[peer] = r
    return out


def format_value(value: float) -> str:
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def format_cell(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    return cell.status if cell.median is None else format_value(cell.median)


def format_table(
    summary: dict[str, dict[str, Cell]], systems: Sequence[str], workloads: Sequence[Workload]
) -> str:
    """Medians per workload and system, then Dista's ratio to each peer."""
    peers = [s for s in systems if s != "dista"]
    rel = ratios(summary, peers) if "dista" in systems else {}
    header = ["workload", "unit", *systems, *(f"vs {p}" for p in peers if "dista" in systems)]
    rows = [header]
    for w in workloads:
        cells = summary.get(w.name, {})
        row = [w.name, w.unit, *(format_cell(cells.get(s)) for s in systems)]
        if "dista" in systems:
            row += [f"{rel[w.name][p]:.2f}x" if p in rel.get(w.name, {}) else "-" for p in peers]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * n for n in widths))
    lines.append("")
    lines.append("Cells: median over rounds. 'vs PEER' is Dista's ratio to PEER, oriented so")
    lines.append("that > 1 means Dista is better (throughput: dista/peer; time, latency and")
    lines.append("memory: peer/dista).")
    return "\n".join(lines)


def method_notes(results: Iterable[Result]) -> list[str]:
    """How each system's big results were timed, and the like-for-like figure for all."""
    methods: dict[str, set[str]] = {}
    like: dict[str, dict[str, list[float]]] = {}
    for r in results:
        method, gbps = r.detail.get("method"), r.detail.get("minus_baseline_gbps")
        if r.status == OK and method:
            methods.setdefault(str(method), set()).add(r.system)
        if r.status == OK and isinstance(gbps, int | float):
            like.setdefault(r.workload, {}).setdefault(r.system, []).append(float(gbps))
    notes = [f"{', '.join(sorted(systems))}: {m}" for m, systems in sorted(methods.items())]
    for workload, by_system in like.items():
        cells = ", ".join(
            f"{system} {format_value(statistics.median(v))}" for system, v in by_system.items()
        )
        notes.append(f"{workload} total minus baseline for all (GB/s): {cells}")
    return notes


# --------------------------------------------------------------------------- engines


class ActorProxy(Protocol):
    """One counter actor: `incr` queues a call, `get` reads one call's count, `collect`
    many; `close` kills the actor (it holds a worker on some systems)."""

    def incr(self) -> Any: ...
    def get(self, call: Any) -> int: ...
    def collect(self, calls: list[Any]) -> list[int]: ...
    def close(self) -> None: ...


class StateActorProxy(Protocol):
    """An actor holding a large NumPy array, with checkpoints (the checkpoint workload).
    Every call waits for its answer, at most `timeout` seconds."""

    def incr(self, timeout: float) -> int: ...
    def pid(self, timeout: float) -> int: ...
    def check(self, timeout: float) -> tuple[int, int, int]: ...  # nbytes, first, last
    def checkpoint(self, timeout: float) -> None: ...
    def workers(self) -> int: ...  # workers the cluster has now
    def close(self) -> None: ...


class Engine(Protocol):
    """What every system offers the workloads; see workloads_peers.py and workloads_dista.py."""

    #: True when `wait` can tell that a task is done without fetching its value
    can_wait: bool

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def pids(self) -> list[int]: ...
    def noop(self) -> Any: ...
    def add(self, a: Any, b: Any) -> Any: ...
    def total(self, *values: Any) -> Any: ...
    def make_bytes(self, size: int) -> Any: ...
    def make_array(self, size: int) -> Any: ...
    def bytes_len(self, size: int) -> Any: ...
    def array_sum(self, array: Any) -> Any: ...
    def wait(self, ref: Any) -> None: ...
    def get(self, ref: Any) -> Any: ...
    def get_all(self, refs: list[Any]) -> list[Any]: ...
    def actor(self) -> ActorProxy | None: ...
    def state_actor(self, size: int, kind: str) -> StateActorProxy | None: ...


def load_engine(system: str) -> Engine:
    """The system's engine, unstarted; ImportError if the system is not installed."""
    module, name, _ = ENGINES[system]
    cls: Callable[[int], Engine] = getattr(import_module(module), name)
    return cls(WORKERS)


# --------------------------------------------------------------------------- memory


def _descendants_proc(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _rss_proc(pid: int) -> tuple[int, int]:
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0, 0
    rss = pages * os.sysconf("SC_PAGE_SIZE")
    return rss, rss  # no PSS without reading smaps: report RSS for both


def _rss_psutil(pid: int) -> tuple[int, int]:
    import psutil

    try:
        proc = psutil.Process(pid)
        rss = proc.memory_info().rss
        try:
            pss = int(getattr(proc.memory_full_info(), "pss", rss))
        except psutil.AccessDenied:
            pss = rss
    except psutil.Error:
        return 0, 0
    return rss, pss


def cluster_memory(extra_pids: Iterable[int] = ()) -> dict[str, int]:
    """RSS and PSS (bytes) of this process, all its descendants and `extra_pids`."""
    me = os.getpid()
    try:
        import psutil

        kids = [p.pid for p in psutil.Process(me).children(recursive=True)]
        read = _rss_psutil
    except ImportError:
        kids = _descendants_proc(me)
        read = _rss_proc
    pids = {me, *kids, *extra_pids}
    readings = [read(pid) for pid in sorted(pids)]
    return {
        "rss": sum(r for r, _ in readings),
        "pss": sum(p for _, p in readings),
        "driver_rss": read(me)[0],
        "processes": len(pids),
    }


# --------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    value: float | None
    detail: dict[str, Any] = field(default_factory=dict)
    status: str = OK


Probe = Callable[["Engine", Sizes], dict[str, Measured]]


def _warm_up(engine: Engine) -> None:
    engine.get_all([engine.noop() for _ in range(4 * WORKERS)])
    for _ in range(5):
        engine.get(engine.noop())


def start_engine(engine: Engine) -> None:
    """Start the cluster; a system whose API is not there yet raises Unavailable."""
    try:
        engine.start()
    except NotImplementedError as exc:
        raise Unavailable(str(exc) or "start is not implemented") from exc


def probe_startup(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    t0 = time.perf_counter()
    start_engine(engine)
    engine.get(engine.noop())
    elapsed = time.perf_counter() - t0
    time.sleep(SETTLE_S)
    mem = cluster_memory(engine.pids())
    return {
        "start": Measured(elapsed),
        "idle_mem": Measured(mem["rss"] / MIB, {"pss_mib": mem["pss"] / MIB, **mem}),
    }


def probe_noop(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    n = sizes.noop
    t0 = time.perf_counter()
    refs = [engine.noop() for _ in range(n)]
    submitted = time.perf_counter()
    engine.get_all(refs)
    elapsed = time.perf_counter() - t0
    return {"noop": Measured(n / elapsed, {"tasks": n, "s": elapsed, "submit_s": submitted - t0})}


def probe_roundtrip(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    samples = []
    for _ in range(sizes.roundtrip):
        t0 = time.perf_counter()
        engine.get(engine.noop())
        samples.append(time.perf_counter() - t0)
    samples.sort()
    p90 = samples[int(0.9 * (len(samples) - 1))]
    detail = {"round_trips": len(samples), "p90_us": p90 * 1e6, "min_us": samples[0] * 1e6}
    return {"roundtrip": Measured(statistics.median(samples) * 1e6, detail)}


def probe_chain(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    n = sizes.chain
    t0 = time.perf_counter()
    ref = engine.add(0, 1)
    for _ in range(n - 1):
        ref = engine.add(ref, 1)
    last = engine.get(ref)
    elapsed = time.perf_counter() - t0
    _expect(last == n, f"chain ended at {last}, not {n}")
    return {"chain": Measured(n / elapsed, {"tasks": n, "s": elapsed})}


def probe_fanin(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    n = sizes.fanin
    t0 = time.perf_counter()
    leaves = [engine.add(i, 0) for i in range(n)]
    result = engine.get(engine.total(*leaves))
    elapsed = time.perf_counter() - t0
    _expect(result == n * (n - 1) // 2, f"fan-in summed to {result}")
    return {"fanin": Measured(elapsed, {"inputs": n})}


def _not_applicable(probe: str, why: str) -> dict[str, Measured]:
    names = [w.name for w in WORKLOADS if w.probe == probe]
    return {n: Measured(None, {"why": why}, NOT_APPLICABLE) for n in names}


def probe_actor(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    proxy = engine.actor()
    if proxy is None:
        return _not_applicable("actor", "no actors")
    try:
        proxy.collect([proxy.incr() for _ in range(10)])  # warm up: the actor is started
        n = sizes.actor
        t0 = time.perf_counter()
        counts = proxy.collect([proxy.incr() for _ in range(n)])
        elapsed = time.perf_counter() - t0
    finally:
        proxy.close()
    # every call counted once (Dask's calls may run in another order than they were made)
    _expect(sorted(counts) == list(range(11, n + 11)), f"actor's counts: {counts[-3:]}...")
    return {"actor": Measured(n / elapsed, {"calls": n, "s": elapsed})}


#: round trips per block: actor calls and tasks alternate block by block
ROUNDTRIP_BLOCK = 100


def _latency(samples: list[float]) -> tuple[float, dict[str, Any]]:
    """The median in µs, and the detail: count, p90, min."""
    ordered = sorted(samples)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    detail = {"round_trips": len(ordered), "p90_us": p90 * 1e6, "min_us": ordered[0] * 1e6}
    return statistics.median(ordered) * 1e6, detail


def probe_actor_roundtrip(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    proxy = engine.actor()
    if proxy is None:
        return _not_applicable("actor_roundtrip", "no actors")
    actor_s: list[float] = []
    task_s: list[float] = []
    try:
        # warm up; the highest count, as Dask may run the calls in another order
        count = max(proxy.collect([proxy.incr() for _ in range(10)]))
        for _ in range(10):
            engine.get(engine.noop())
        block = min(ROUNDTRIP_BLOCK, sizes.actor_roundtrip)
        while len(actor_s) < sizes.actor_roundtrip:
            for _ in range(block):
                t0 = time.perf_counter()
                value = proxy.get(proxy.incr())
                actor_s.append(time.perf_counter() - t0)
                count += 1
                _expect(value == count, f"actor call answered {value}, not {count}")
            for _ in range(block):
                t0 = time.perf_counter()
                engine.get(engine.noop())
                task_s.append(time.perf_counter() - t0)
    finally:
        proxy.close()
    actor_us, actor_detail = _latency(actor_s)
    task_us, task_detail = _latency(task_s)
    return {
        "actor_roundtrip": Measured(actor_us, actor_detail),
        "actor_task_roundtrip": Measured(task_us, task_detail),
        "actor_vs_task": Measured(task_us / actor_us, {"actor_us": actor_us, "task_us": task_us}),
    }


#: checkpoints and restores per round (each round's cell is their median)
CHECKPOINTS = 5
RESTORES = 2
CHECKPOINT_TIMEOUT_S = 120.0
MB = 1e6


def _run(command: list[str], timeout: float = CHECKPOINT_TIMEOUT_S) -> float:
    """Run a command (its output thrown away); its wall time."""
    t0 = time.perf_counter()
    subprocess.run(
        command, check=True, timeout=timeout, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def _write_fsync(path: Path, data: bytes) -> float:
    t0 = time.perf_counter()
    with path.open("wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def _read_file(path: Path, size: int) -> float:
    t0 = time.perf_counter()
    with path.open("rb") as f:
        data = f.read()
    elapsed = time.perf_counter() - t0
    _expect(len(data) >= size, f"read {len(data)} bytes of {path}, fewer than {size}")
    return elapsed


def filesystem_of(path: Path) -> str:
    """The type and device of the filesystem holding `path` (from /proc/mounts)."""
    best, found = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return found
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1]
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, found = point, f"{fields[2]} on {fields[0]} at {point}"
    return found


def checkpoint_root() -> Path:
    """The directory of the ``file://`` store the parent named for this child."""
    uri = os.environ.get(CHECKPOINT_ENV, "")
    _expect(uri.startswith("file://"), f"{CHECKPOINT_ENV} is {uri!r}, not a file:// URI")
    root = Path(uri.removeprefix("file://"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _await_workers(proxy: StateActorProxy, want: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while proxy.workers() < want:
        _expect(time.monotonic() < deadline, f"fewer than {want} workers after {timeout} s")
        time.sleep(0.05)


def _warm_spare(engine: Engine) -> None:
    """Have the worker the actor will be restored onto import NumPy (a task that sums a
    small array: it can only run there, the actor's worker runs nothing else), so that the
    restore measured is the store's and the runtime's, not NumPy's first import."""
    import numpy as np

    _expect(engine.get(engine.array_sum(np.ones(8))) == 8.0, "warm-up sum is not 8")


def _restore_once(
    proxy: StateActorProxy, engine: Engine, size: int, root: Path
) -> tuple[float, float, float]:
    """Kill the actor's worker, time until a call answers; then the two reads of the
    checkpoint it was restored from. Seconds: (restore, Python read, cat)."""
    _await_workers(proxy, WORKERS, CHECKPOINT_TIMEOUT_S)  # a worker to restore onto
    _warm_spare(engine)
    before = proxy.incr(CHECKPOINT_TIMEOUT_S)
    proxy.checkpoint(CHECKPOINT_TIMEOUT_S)  # the newest state: nothing to replay
    pid = proxy.pid(CHECKPOINT_TIMEOUT_S)
    _expect(pid in engine.pids(), f"the actor's PID {pid} is none of the cluster's")
    os.sync()  # no dirty pages of earlier steps in the way
    os.kill(pid, signal.SIGKILL)
    t0 = time.perf_counter()
    after = proxy.incr(CHECKPOINT_TIMEOUT_S)
    elapsed = time.perf_counter() - t0
    _expect(after == before + 1, f"restored actor counted {after}, not {before + 1}")
    moved = proxy.pid(CHECKPOINT_TIMEOUT_S)
    _expect(moved != pid, f"the actor answered from its killed worker {pid}")
    _expect(proxy.check(CHECKPOINT_TIMEOUT_S) == (size, 0xAB, 0xAB), "restored state differs")
    files = sorted(root.rglob("*.ckpt"), key=lambda p: p.stat().st_mtime)
    _expect(bool(files), f"no checkpoint file under {root}")
    read_s = _read_file(files[-1], size)
    cat_s = _run(["cat", str(files[-1])])
    return elapsed, read_s, cat_s


def _references(source: Path, data: bytes, times: dict[str, list[float]]) -> None:
    """One of each reference write next to `source`, each from a synced disk."""
    folder = source.parent
    copy, synced, written = folder / "cp", folder / "cp-sync", folder / "write"
    os.sync()
    times.setdefault("cp", []).append(_run(["cp", str(source), str(copy)]))
    os.sync()
    t = _run(["cp", str(source), str(synced)]) + _run(["sync", str(synced)])
    times.setdefault("cp_sync", []).append(t)
    os.sync()
    times.setdefault("write_fsync", []).append(_write_fsync(written, data))
    for path in (copy, synced, written):
        path.unlink()


def _state_rounds(
    engine: Engine, kind: str, size: int, root: Path, source: Path, data: bytes
) -> dict[str, list[float]] | None:
    """Checkpoints and restores of one actor whose state is `kind` ("numpy": out of band;
    "bytes": in the pickle), the references interleaved; None if the engine has none."""
    proxy = engine.state_actor(size, kind)
    if proxy is None:
        return None
    times: dict[str, list[float]] = {}
    try:
        _expect(proxy.check(CHECKPOINT_TIMEOUT_S) == (size, 0xAB, 0xAB), "state differs")
        for _ in range(CHECKPOINTS):
            _references(source, data, times)
            proxy.incr(CHECKPOINT_TIMEOUT_S)  # a call since the last checkpoint
            os.sync()
            t0 = time.perf_counter()
            proxy.checkpoint(CHECKPOINT_TIMEOUT_S)
            times.setdefault("checkpoint", []).append(time.perf_counter() - t0)
        for _ in range(RESTORES):
            restore_s, read_s, cat_s = _restore_once(proxy, engine, size, root)
            times.setdefault("restore", []).append(restore_s)
            times.setdefault("read", []).append(read_s)
            times.setdefault("cat", []).append(cat_s)
    finally:
        proxy.close()
    return times


def probe_checkpoint(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    size = sizes.checkpoint
    root = checkpoint_root()
    refs = Path(tempfile.mkdtemp(prefix="references-", dir=root))  # the same filesystem
    try:
        data = b"\xab" * size
        source = refs / "source"
        _write_fsync(source, data)
        by_kind: dict[str, dict[str, list[float]]] = {}
        for kind in ("numpy", "bytes"):
            got = _state_rounds(engine, kind, size, root, source, data)
            if got is None:
                return _not_applicable("checkpoint", "no actor checkpoints")
            by_kind[kind] = got
    finally:
        shutil.rmtree(refs, ignore_errors=True)
    numpy, in_band = by_kind["numpy"], by_kind["bytes"]
    s = {name: statistics.median(values) for name, values in numpy.items()}
    for name in ("cp", "cp_sync", "write_fsync", "read", "cat"):  # both kinds' references
        s[name] = statistics.median(numpy[name] + in_band[name])
    s["checkpoint_bytes"] = statistics.median(in_band["checkpoint"])
    s["restore_bytes"] = statistics.median(in_band["restore"])
    detail: dict[str, Any] = {
        "bytes": size,
        "filesystem": filesystem_of(root),
        "median_s": s,
        "all_s": by_kind,
    }

    def mbps(name: str) -> Measured:
        return Measured(size / s[name] / MB, detail)

    def over(a: str, b: str) -> Measured:
        return Measured(s[b] / s[a], detail)  # a's speed over b's

    return {
        "checkpoint": mbps("checkpoint"),
        "checkpoint_bytes": mbps("checkpoint_bytes"),
        "checkpoint_cp": mbps("cp"),
        "checkpoint_cp_sync": mbps("cp_sync"),
        "checkpoint_write_fsync": mbps("write_fsync"),
        "checkpoint_vs_cp": over("checkpoint", "cp"),
        "checkpoint_vs_cp_sync": over("checkpoint", "cp_sync"),
        "restore": mbps("restore"),
        "restore_bytes": mbps("restore_bytes"),
        "restore_read": mbps("read"),
        "restore_cat": mbps("cat"),
        "restore_vs_read": over("restore", "read"),
    }


def _timed_get(engine: Engine, make: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = engine.get(make())
    return time.perf_counter() - t0, value


def _minus_baseline(engine: Engine, size: int) -> tuple[float, dict[str, Any]]:
    """The whole task's time less that of one building the same bytes but returning 8."""
    baseline = statistics.median(
        _timed_get(engine, lambda: engine.bytes_len(size))[0] for _ in range(3)
    )
    total, value = _timed_get(engine, lambda: engine.make_bytes(size))
    _expect(len(value) == size, f"got {len(value)} bytes, not {size}")
    return total - baseline, {"total_s": total, "baseline_s": baseline}


def _get_after_finish(engine: Engine, size: int) -> float:
    ref = engine.make_bytes(size)
    engine.wait(ref)
    t0 = time.perf_counter()
    value = engine.get(ref)
    elapsed = time.perf_counter() - t0
    _expect(len(value) == size, f"got {len(value)} bytes, not {size}")
    return elapsed


def _gbps(size: int, seconds: float) -> float | None:
    return size / seconds / GB if seconds > 0 else None


def read_big(engine: Engine, size: int) -> Measured:
    """A `size`-byte bytes result built on a worker and read by the driver.

    Every system also gets the total-minus-baseline figure (in the detail), so that the
    ones that can wait are comparable like for like with the ones that cannot.
    """
    net, detail = _minus_baseline(engine, size)
    detail.update(bytes=size, minus_baseline_gbps=_gbps(size, net))
    if engine.can_wait:
        elapsed = _get_after_finish(engine, size)
        detail.update(method="get after finish", get_s=elapsed)
    else:
        elapsed = net
        detail["method"] = "total minus baseline"
    value = _gbps(size, elapsed)
    return Measured(value, detail, OK if value is not None else ERROR)


#: Each large-object row is the median of this many results.
LARGE_RUNS = 3


def _submit_to_value(engine: Engine, make: Callable[[], Any], size: int) -> Measured:
    times = []
    for _ in range(LARGE_RUNS):
        elapsed, value = _timed_get(engine, make)
        _expect(len(value) == size, f"got {len(value)} bytes, not {size}")
        _expect(int(value[-1]) == 0xAB, f"the last byte is {value[-1]!r}")
        del value
        times.append(elapsed)
    median = statistics.median(times)
    return Measured(_gbps(size, median), {"bytes": size, "s": median, "runs": times})


def probe_large(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    out: dict[str, Measured] = {}
    for label, size in (("256", sizes.big256), ("1g", sizes.big1g)):
        out[f"bytes{label}"] = _submit_to_value(engine, partial(engine.make_bytes, size), size)
        out[f"np{label}"] = _submit_to_value(engine, partial(engine.make_array, size), size)
    if not engine.can_wait:
        out["np1g_get"] = Measured(None, {"why": "cannot wait without the value"}, NOT_APPLICABLE)
        return out
    gets = []
    for _ in range(LARGE_RUNS):
        ref = engine.make_array(sizes.big1g)
        engine.wait(ref)
        t0 = time.perf_counter()
        value = engine.get(ref)
        gets.append(time.perf_counter() - t0)
        _expect(len(value) == sizes.big1g, f"got {len(value)} bytes")
        del value, ref
    out["np1g_get"] = Measured(statistics.median(gets) * 1e3, {"runs_s": gets})
    return out


def probe_big256(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    return {"big256": read_big(engine, sizes.big256)}


def probe_big1g(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    return {"big1g": read_big(engine, sizes.big1g)}


def probe_numpy_arg(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    import numpy as np

    array = np.random.default_rng(0).random(sizes.numpy_arg // 8)
    expected = float(array.sum())
    elapsed, result = _timed_get(engine, lambda: engine.array_sum(array))
    _expect(abs(result - expected) <= 1e-9 * abs(expected), f"sum {result} != {expected}")
    return {"numpy_arg": Measured(elapsed, {"bytes": array.nbytes})}


def probe_queued(engine: Engine, sizes: Sizes) -> dict[str, Measured]:
    n = sizes.queued
    before = cluster_memory(engine.pids())
    t0 = time.perf_counter()
    refs = [engine.noop() for _ in range(n)]
    t1 = time.perf_counter()
    after = cluster_memory(engine.pids())
    engine.get_all(refs)
    t2 = time.perf_counter()
    del refs
    detail = {
        "tasks": n,
        "driver_growth_mib": (after["driver_rss"] - before["driver_rss"]) / MIB,
        "bytes_per_task": (after["rss"] - before["rss"]) / n,
    }
    return {
        "queued_mem": Measured((after["rss"] - before["rss"]) / MIB, detail),
        "queued_submit": Measured(t1 - t0, {"tasks": n}),
        "queued_drain": Measured(t2 - t1, {"tasks": n, "total_s": t2 - t0}),
    }


PROBES: dict[str, Probe] = {
    "startup": probe_startup,
    "noop": probe_noop,
    "roundtrip": probe_roundtrip,
    "chain": probe_chain,
    "fanin": probe_fanin,
    "actor": probe_actor,
    "actor_roundtrip": probe_actor_roundtrip,
    "checkpoint": probe_checkpoint,
    "big256": probe_big256,
    "large": probe_large,
    "big1g": probe_big1g,
    "numpy_arg": probe_numpy_arg,
    "queued": probe_queued,
}


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


# --------------------------------------------------------------------------- the child


def _write(out: Path, results: list[Result]) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in results]))
    tmp.replace(out)


def _fail_all(
    system: str, names: Iterable[str], status: str, error: str, rnd: int = 0
) -> list[Result]:
    return [Result(system, n, rnd, status, error=error) for n in names]


def _run_probe(engine: Engine, probe: str, sizes: Sizes) -> dict[str, Measured]:
    try:
        return PROBES[probe](engine, sizes)
    except Unavailable:
        raise
    except NotImplementedError as exc:
        status, error = NOT_APPLICABLE, f"not implemented: {exc}"
    except Exception as exc:  # noqa: BLE001  (any failure is a result to report)
        status, error = ERROR, f"{type(exc).__name__}: {exc}"
    names = [w.name for w in WORKLOADS if w.probe == probe]
    return {n: Measured(None, {"error": error}, status) for n in names}


def run_child(system: str, group: str, names: Sequence[str], sizes: Sizes, out: Path) -> int:
    """Run one group of workloads on one system's cluster; results go to `out` as JSON."""
    wanted = [w.name for w in WORKLOADS if w.name in names and PROBE_GROUP[w.probe] == group]
    probes = [p for p, g in PROBE_GROUP.items() if g == group]
    probes = [p for p in probes if any(BY_NAME[n].probe == p for n in wanted)]
    try:
        engine = load_engine(system)
    except ImportError as exc:
        _write(out, _fail_all(system, wanted, NOT_INSTALLED, str(exc)))
        return 0
    results: list[Result] = []
    try:
        if group != "startup":
            start_engine(engine)
            _warm_up(engine)
        for probe in probes:
            for name, m in _run_probe(engine, probe, sizes).items():
                if name in wanted:
                    error = str(m.detail.get("error", ""))
                    results.append(Result(system, name, 0, m.status, m.value, m.detail, error))
            _write(out, results)
    except Unavailable as exc:
        _write(out, _fail_all(system, wanted, UNAVAILABLE, str(exc)))
    except Exception as exc:  # noqa: BLE001  (any failure is a result to report)
        done = {r.workload for r in results}
        error = f"{type(exc).__name__}: {exc}"
        _write(
            out, [*results, *_fail_all(system, [n for n in wanted if n not in done], ERROR, error)]
        )
    finally:
        engine.stop()
    return 0


# --------------------------------------------------------------------------- the parent


def installed(system: str) -> bool:
    return util.find_spec(ENGINES[system][2]) is not None


def child_env(checkpoints: Path | None = None) -> dict[str, str]:
    """The child's environment; `checkpoints`: the directory of its checkpoint store."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reporting home
    if checkpoints is not None:
        env[CHECKPOINT_ENV] = checkpoints.as_uri()
    return env


def kill_session(sid: int) -> None:
    """SIGKILL every process still in session `sid` (the child and what it started)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


@dataclass(frozen=True)
class RunSpec:
    system: str
    group: str
    round: int
    names: tuple[str, ...]
    quick: bool
    timeout_s: float


def child_command(spec: RunSpec, out: Path) -> list[str]:
    command = [sys.executable, "-m", "benchmarks", "--child", spec.system]
    command += ["--group", spec.group, "--child-out", str(out), "--only", ",".join(spec.names)]
    return [*command, "--quick"] if spec.quick else command


def run_group(spec: RunSpec) -> list[Result]:
    """One child process: one system, one group, one round."""
    # Removed here even when the child is killed: what it wrote (checkpoints too) goes.
    with tempfile.TemporaryDirectory(prefix="dista-bench-") as tmp:
        out, log = Path(tmp) / "results.json", Path(tmp) / "log.txt"
        checkpoints = Path(tmp) / "checkpoints" if spec.group == "checkpoint" else None
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                child_command(spec, out),
                cwd=ROOT,
                env=child_env(checkpoints),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                rc: int | None = proc.wait(timeout=spec.timeout_s)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                kill_session(proc.pid)
                proc.wait()
        done = [Result(**r) for r in json.loads(out.read_text())] if out.exists() else []
        tail = log.read_text(errors="replace")[-2000:]
    missing = [n for n in spec.names if n not in {r.workload for r in done}]
    if rc is None:
        failed = _fail_all(spec.system, missing, TIMEOUT, f"over {spec.timeout_s:.0f} s")
    else:
        failed = _fail_all(spec.system, missing, ERROR, f"child exited {rc}: {tail}")
    for r in (*done, *failed):
        r.round = spec.round
    return [*done, *failed]


def run_all(
    systems: Sequence[str],
    workloads: Sequence[Workload],
    rounds: int,
    quick: bool,
    timeout_s: float | None,
    log: Callable[[str], None],
) -> list[Result]:
    """Every round: every group, and within it every system in turn."""
    results: list[Result] = []
    done_with: dict[str, str] = {}  # system -> final status
    for system in systems:
        if not installed(system):
            done_with[system] = NOT_INSTALLED
            log(f"{system}: not installed")
    for rnd in range(1, rounds + 1):
        for group in groups_of(workloads):
            names = tuple(w.name for w in workloads if PROBE_GROUP[w.probe] == group)
            timeout = timeout_s or GROUP_TIMEOUT_S[group] * (0.5 if quick else 1.0)
            for system in systems:
                if system in done_with:
                    results += _fail_all(system, names, done_with[system], "", rnd)
                    continue
                runnable = tuple(n for n in names if unsupported(system, n) is None)
                for name in names:
                    why = unsupported(system, name)
                    if why is not None:
                        results.append(Result(system, name, rnd, NOT_APPLICABLE, error=why))
                if not runnable:
                    continue
                t0 = time.perf_counter()
                got = run_group(RunSpec(system, group, rnd, runnable, quick, timeout))
                results += got
                log(_progress(rnd, rounds, system, group, got, time.perf_counter() - t0))
                final = {r.status for r in got} & FINAL_STATUSES
                if final:
                    done_with[system] = final.pop()
                    log(f"{system}: {done_with[system]}: {got[0].error}")
    return results


def _progress(rnd: int, rounds: int, system: str, group: str, got: list[Result], s: float) -> str:
    states = ", ".join(
        f"{r.workload}={format_value(r.value) if r.value is not None else r.status}" for r in got
    )
    return f"round {rnd}/{rounds}  {system:<5}  {group:<7}  {s:6.1f} s  {states}"


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def machine_info() -> dict[str, Any]:
    usable: int | None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    memory: int | None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        memory = None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "memory_bytes": memory,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "packages": package_versions(),
    }


def report(
    results: Sequence[Result],
    systems: Sequence[str],
    workloads: Sequence[Workload],
    config: dict[str, Any],
) -> dict[str, Any]:
    """Everything the JSON file holds."""
    summary = summarize(results)
    peers = [s for s in systems if s != "dista"]
    return {
        "machine": machine_info(),
        "config": config,
        "workloads": [asdict(w) for w in workloads],
        "ratio_orientation": "> 1 means Dista is better (throughput dista/peer, else peer/dista)",
        "summary": {
            name: {system: asdict(cell) for system, cell in cells.items()}
            for name, cells in summary.items()
        },
        "ratios": ratios(summary, peers),
        "measurements": [asdict(r) for r in results],
    }
