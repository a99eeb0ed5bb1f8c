"""The cost of mutual TLS: small-task throughput and the 256 MiB transfer, TLS against plain.

Run it from a checkout (or with the checkout and its ``bindings`` on ``PYTHONPATH``)::

    python benchmarks/tls.py                 # 5 runs of every variant, ~5 minutes
    python benchmarks/tls.py --quick         # 2 runs, 5,000 tasks, one get per transfer
    python benchmarks/tls.py --runs 7 --loops asyncio anyio gevent --no-write

Certificates are made once (`dista certs`) into a temporary directory. Every sample is a
fresh child process, with ``DISTA_TLS_DIR`` set (TLS) or not (plain); within a run each
variant's plain and TLS children follow each other, their order flipping from run to run,
so that a noisy moment on the machine lands on both. Every cluster is a head and 2 worker
processes:

- tasks (local): ``dista.init(workers=2)``; the driver is linked to its embedded head in
  memory, so only the head's links to the workers are TLS (a Unix socket where there is
  one). After a warm-up, the time of ``dista.get`` of ``--tasks`` ``inc(i)`` refs, from the
  first submit to the last value: tasks per second.
- tasks (TCP): ``dista head --port 0`` and ``dista worker --processes 2`` started apart,
  the driver joining with ``dista.init(address=...)`` over loopback TCP: the driver's link
  to the head is TLS too.
- transfer: a local cluster, a task returning ``np.ones(256 MiB, uint8)``, polled until
  done, then only ``ref.get()`` timed (as `benchmarks/transfer.py`): the bytes go from the
  worker's object server to the driver over loopback TCP, in TLS or not. One untimed
  warm-up, then ``--gets`` timed gets per child (their median is the child's figure).
  ``--loops`` names the bindings (``DISTA_LOOP``): asyncio's TLS is the standard library's
  sslproto, anyio's and gevent's the in-memory `dista_runtime._tls.stream.TLSStream`.

Printed: per variant the median over runs (min-max) plain and TLS, TLS/plain, and whether
the issue's targets hold: TLS small-task throughput within 25% of plain (ratio >= 0.75),
the 256 MiB transfer over TLS at least 1 GB/s. Written to ``benchmarks/results/tls.md``
unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # as a script: the checkout this file lives in
    sys.path[:0] = [str(ROOT), str(ROOT / "bindings")]

import dista_runtime as dista
from benchmarks.runner import kill_session

MiB = 1 << 20
TASK_RATIO_TARGET = 0.75  # TLS within 25% of plain
TRANSFER_TARGET_GB_S = 1.0
RESULT_MARK = "DISTA-TLS-RESULT "
CHILD_TIMEOUT_S = 600.0
RESULTS_MD = ROOT / "benchmarks" / "results" / "tls.md"
#: Where the hand-written part of `RESULTS_MD` starts: a new run keeps it as it is.
NOTES = "\n## Notes"


def _kept_notes() -> str:
    try:
        old = RESULTS_MD.read_text()
    except OSError:
        return ""
    at = old.find(NOTES)
    return "" if at < 0 else old[at:]


@dista.task
def inc(x: int) -> int:
    return x + 1


@dista.task
def ones(size: int) -> np.ndarray:
    """A fresh array of ``size`` bytes, kept on its worker (far over inline size)."""
    return np.ones(size, dtype=np.uint8)


# --------------------------------------------------------------------------- the child


def _tasks(n: int, reps: int) -> list[float]:
    dista.get([inc.remote(i) for i in range(min(n, 2000))])  # warm-up
    rates = []
    for _ in range(reps):
        start = time.perf_counter()
        values = dista.get([inc.remote(i) for i in range(n)])
        elapsed = time.perf_counter() - start
        if values[-1] != n:
            raise SystemExit(f"wrong value: inc({n - 1}) gave {values[-1]}")
        rates.append(n / elapsed)
        del values
    return rates


def _cpu_of(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes ``pids`` have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


#: Per timed get: CPU seconds of the driver and of the workers (`_one_get`).
CPU: list[tuple[float, float]] = []


def _one_get(size: int, timeout: float = 120.0) -> float:
    ref = ones.remote(size)
    # Poll, not dista.wait: a waiter would start the fetch before the clock.
    deadline = time.monotonic() + timeout
    while not ref.done():
        if time.monotonic() > deadline:
            raise SystemExit(f"the task of {size} bytes did not finish in {timeout} s")
        time.sleep(0.001)
    workers = dista.local_pids()
    cpu0, wcpu0 = time.process_time(), _cpu_of(workers)
    start = time.perf_counter()
    value = ref.get(timeout=timeout)
    elapsed = time.perf_counter() - start
    CPU.append((time.process_time() - cpu0, _cpu_of(workers) - wcpu0))
    if value.nbytes != size or int(value[-1]) != 1:
        raise SystemExit(f"wrong value: {value.nbytes} bytes, last {value[-1]}")
    del value, ref
    gc.collect()
    return size / elapsed / 1e9


#: The child's first get (the warm-up): into fresh maps, the link's handshake included.
FIRST: list[float] = []


def _transfer(size: int, reps: int) -> list[float]:
    # Warm-up: the fetch link (its handshake), the worker's allocator, and the driver's
    # receive buffers (`dista_runtime._values.buffer_cache`): later gets land in pages faulted in.
    FIRST.append(_one_get(size))
    CPU.clear()
    return [_one_get(size) for _ in range(reps)]


def _head_and_workers(loop: str, tmp: str) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """``dista head`` and ``dista worker --processes 2`` apart from this process; the
    head's address once both are up."""
    cli = [sys.executable, "-m", "dista_runtime.cli"]
    log = Path(tmp) / "head.log"
    with log.open("wb") as sink:
        head = subprocess.Popen(
            [*cli, "head", "--port", "0", "--loop", loop],
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    procs = [head]
    deadline = time.monotonic() + 30
    address = ""
    while not address:
        for line in log.read_text(errors="replace").splitlines():
            if "listening on" in line:
                address = line.rsplit(" ", 1)[-1]
        if head.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the head did not start: {log.read_text(errors='replace')}")
        time.sleep(0.02)
    command = [*cli, "worker", "--head", address, "--processes", "2", "--loop", loop]
    # Run as a script, this driver's tasks are ``__main__``'s and travel by value: workers
    # importing ``benchmarks.tls`` have another registry, so they must accept by-value code.
    command.append("--accept-by-value")
    procs.append(
        subprocess.Popen(
            [*command, "--import", "benchmarks.tls"], cwd=ROOT, stdin=subprocess.DEVNULL
        )
    )
    return address, procs


def child(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="benchmarks.tls child")
    p.add_argument("kind", choices=["tasks-local", "tasks-tcp", "transfer"])
    p.add_argument("--loop", default="asyncio")
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--size", type=int, default=256 * MiB)
    p.add_argument("--reps", type=int, default=1)
    args = p.parse_args(argv)
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="dista-tls-bench-") as tmp:
        try:
            if args.kind == "tasks-tcp":
                address, procs = _head_and_workers(args.loop, tmp)
                with dista.init(address=address, loop=args.loop):
                    deadline = time.monotonic() + 30
                    while dista.stats().workers < 2:
                        if time.monotonic() > deadline:
                            raise SystemExit("the 2 workers did not join in 30 s")
                        time.sleep(0.05)
                    values = _tasks(args.tasks, args.reps)
            else:
                with dista.init(workers=2, loop=args.loop):
                    if args.kind == "tasks-local":
                        values = _tasks(args.tasks, args.reps)
                    else:
                        values = _transfer(args.size, args.reps)
        finally:
            for proc in reversed(procs):
                proc.send_signal(signal.SIGINT)
            for proc in reversed(procs):
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    print(RESULT_MARK + json.dumps({"values": values, "cpu": CPU, "first": FIRST}), flush=True)
    return 0


# --------------------------------------------------------------------------- the parent


@dataclass
class Variant:
    name: str
    kind: str
    loop: str
    unit: str
    values: dict[bool, list[float]] = field(default_factory=lambda: {False: [], True: []})
    #: Per child, the median CPU seconds of a get: (driver, workers) (transfers only).
    cpu: dict[bool, list[tuple[float, float]]] = field(
        default_factory=lambda: {False: [], True: []}
    )
    #: Per child, its first get's rate (transfers only: fresh maps, not in the table).
    first: dict[bool, list[float]] = field(default_factory=lambda: {False: [], True: []})
    errors: list[str] = field(default_factory=list)


def run_child(variant: Variant, tls_dir: str | None, args: argparse.Namespace) -> dict:
    env = dict(os.environ)
    for name in ("DISTA_TLS_DIR", "DISTA_TLS_CA", "DISTA_TLS_CERT", "DISTA_TLS_KEY"):
        env.pop(name, None)
    if tls_dir is not None:
        env["DISTA_TLS_DIR"] = tls_dir
    env["DISTA_LOOP"] = variant.loop
    paths = [str(ROOT), str(ROOT / "bindings"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    reps = args.gets if variant.kind == "transfer" else 1
    command = [
        sys.executable,
        "-c",
        "import sys; from benchmarks.tls import child; sys.exit(child(sys.argv[1:]))",
        variant.kind,
        "--loop",
        variant.loop,
        "--tasks",
        str(args.tasks),
        "--size",
        str(args.size_mib * MiB),
        "--reps",
        str(reps),
    ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        proc.communicate()
        raise RuntimeError(f"over {CHILD_TIMEOUT_S:.0f} s") from None
    finally:
        kill_session(proc.pid)
    text = out.decode(errors="replace")
    for line in text.splitlines():
        if line.startswith(RESULT_MARK):
            result: dict = json.loads(line[len(RESULT_MARK) :])
            return result
    raise RuntimeError(f"child exited {proc.returncode}: {text[-1500:]}")


def make_certs(directory: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "dista_runtime.cli", "certs", directory],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "bindings")])},
    )


def _fmt(value: float, unit: str) -> str:
    return f"{value:,.0f}" if unit == "tasks/s" else f"{value:.2f}"


def summarize(variant: Variant) -> dict[str, str]:
    row = {"variant": variant.name, "unit": variant.unit}
    medians: dict[bool, float | None] = {}
    for tls in (False, True):
        values = variant.values[tls]
        if values:
            medians[tls] = statistics.median(values)
            row["tls" if tls else "plain"] = _fmt(medians[tls] or 0.0, variant.unit)
            row["tls_range" if tls else "plain_range"] = (
                f"{_fmt(min(values), variant.unit)}-{_fmt(max(values), variant.unit)}"
            )
        else:
            medians[tls] = None
            row["tls" if tls else "plain"] = "failed"
            row["tls_range" if tls else "plain_range"] = ""
    plain, tls_ = medians[False], medians[True]
    row["ratio"] = f"{tls_ / plain:.2f}" if plain and tls_ else "-"
    if variant.kind == "transfer":
        row["target"] = f"TLS >= {TRANSFER_TARGET_GB_S:g} GB/s"
        row["met"] = "-" if tls_ is None else ("yes" if tls_ >= TRANSFER_TARGET_GB_S else "NO")
    else:
        row["target"] = f"TLS/plain >= {TASK_RATIO_TARGET:g}"
        ok = plain and tls_ and tls_ / plain >= TASK_RATIO_TARGET
        row["met"] = "-" if not (plain and tls_) else ("yes" if ok else "NO")
    return row


COLUMNS = [
    ("variant", "variant"),
    ("unit", "unit"),
    ("plain", "plain median"),
    ("plain_range", "plain min-max"),
    ("tls", "TLS median"),
    ("tls_range", "TLS min-max"),
    ("ratio", "TLS/plain"),
    ("target", "target"),
    ("met", "met"),
]


def text_table(rows: list[dict[str, str]]) -> str:
    widths = [max(len(title), *(len(r[key]) for r in rows)) for key, title in COLUMNS]
    lines = ["  ".join(t.ljust(w) for (_, t), w in zip(COLUMNS, widths, strict=True))]
    lines += [
        "  ".join(r[k].ljust(w) for (k, _), w in zip(COLUMNS, widths, strict=True)) for r in rows
    ]
    return "\n".join(lines)


def cpu_table(variants: list[Variant], size_mib: int) -> str:
    """CPU seconds a get costs, which the machine's noise moves far less than its time:
    the driver's (reading, decrypting) and the workers' (serving, encrypting); the rate
    two free cores could sustain is about the size over the larger of the two."""
    lines = []
    for v in variants:
        if not (v.cpu[False] or v.cpu[True]):
            continue
        cells = []
        for tls in (False, True):
            if not v.cpu[tls]:
                cells.append("failed")
                continue
            driver = statistics.median(c[0] for c in v.cpu[tls])
            workers = statistics.median(c[1] for c in v.cpu[tls])
            bound = size_mib * MiB / max(driver, workers, 1e-9) / 1e9
            cells.append(f"{driver:.2f} s / {workers:.2f} s (~{bound:.1f} GB/s)")
        lines.append(f"{v.name}: plain {cells[0]}; TLS {cells[1]}")
    for v in variants:
        if v.first[False] and v.first[True]:
            plain, tls_ = (statistics.median(v.first[t]) for t in (False, True))
            lines.append(
                f"{v.name}, each child's first get (fresh receive maps; the warm-up, not in "
                f"the table): plain {plain:.2f} GB/s, TLS {tls_:.2f} GB/s (medians)"
            )
    if not lines:
        return ""
    title = "CPU per get, driver / workers (median; the rate if each had a core of its own):"
    return "\n".join([title, *lines])


def markdown(rows: list[dict[str, str]], header: str, cpu_text: str = "") -> str:
    lines = [
        "# Mutual TLS against plain TCP",
        "",
        header,
        "",
        "| " + " | ".join(t for _, t in COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(r[k] for k, _ in COLUMNS) + " |" for r in rows]
    if cpu_text:
        title, *rest = cpu_text.splitlines()
        lines += ["", title, "", *(f"- {line}" for line in rest)]
    return "\n".join(lines) + "\n"


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import ssl

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} CPUs ({cpu or platform.machine()}), {platform.system()} "
        f"{platform.release()}, CPython {platform.python_version()}, {ssl.OPENSSL_VERSION}; "
        f"load average at the end {load}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="children per variant and mode")
    parser.add_argument("--quick", action="store_true", help="2 runs, 5,000 tasks, 1 get")
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per throughput run")
    parser.add_argument("--size-mib", type=int, default=256, help="transfer size in MiB")
    parser.add_argument("--gets", type=int, default=3, help="timed gets per transfer child")
    parser.add_argument(
        "--loops",
        nargs="+",
        default=["asyncio", "anyio", "gevent"],
        help="bindings for the transfer (DISTA_LOOP); the task variants run on the first",
    )
    parser.add_argument(
        "--only", nargs="+", choices=["tasks-local", "tasks-tcp", "transfer"], help="kinds"
    )
    parser.add_argument(
        "--certs", help="a directory `dista certs` made (default: made afresh, in a temp dir)"
    )
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS_MD}")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.tasks, args.gets = min(args.runs, 2), 5_000, 1
    kinds = args.only or ["tasks-local", "tasks-tcp", "transfer"]
    variants: list[Variant] = []
    first = args.loops[0]
    if "tasks-local" in kinds:
        variants.append(
            Variant(f"{args.tasks:,} tasks, local ({first})", "tasks-local", first, "tasks/s")
        )
    if "tasks-tcp" in kinds:
        variants.append(
            Variant(f"{args.tasks:,} tasks, TCP driver ({first})", "tasks-tcp", first, "tasks/s")
        )
    if "transfer" in kinds:
        for loop in args.loops:
            name = f"{args.size_mib} MiB get ({loop})"
            variants.append(Variant(name, "transfer", loop, "GB/s"))
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(
        f"Dista TLS vs plain: {args.runs} runs, {len(variants)} variants, "
        f"{args.tasks:,} tasks, {args.size_mib} MiB x {args.gets} gets a child",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="dista-tls-certs-") as made:
        certs = args.certs or made
        if not args.certs:
            make_certs(certs)
        for run in range(args.runs):
            for variant in variants:
                order = (False, True) if run % 2 == 0 else (True, False)
                for tls in order:
                    try:
                        result = run_child(variant, certs if tls else None, args)
                    except RuntimeError as e:
                        variant.errors.append(f"{'TLS' if tls else 'plain'}: {e}")
                        print(f"  run {run + 1} {variant.name} {'TLS' if tls else 'plain'}: {e}")
                        continue
                    value = statistics.median(result["values"])
                    variant.values[tls].append(value)
                    if result["cpu"]:
                        driver = statistics.median(c[0] for c in result["cpu"])
                        workers = statistics.median(c[1] for c in result["cpu"])
                        variant.cpu[tls].append((driver, workers))
                    variant.first[tls] += result.get("first", [])
                    mode = "TLS  " if tls else "plain"
                    print(
                        f"  run {run + 1}/{args.runs} {mode} {variant.name}: "
                        f"{_fmt(value, variant.unit)} {variant.unit}",
                        flush=True,
                    )
    rows = [summarize(v) for v in variants]
    print()
    print(text_table(rows))
    cpu_text = cpu_table(variants, args.size_mib)
    if cpu_text:
        print()
        print(cpu_text)
    finished = time.strftime("%H:%M UTC", time.gmtime())
    header = (
        f"Measured {started} to {finished} by `python benchmarks/tls.py --runs {args.runs}"
        f"{' --quick' if args.quick else ''}` ({args.tasks:,} tasks a run; "
        f"{args.size_mib} MiB, median of {args.gets} gets a child). Every figure is the median "
        f"over {args.runs} fresh child processes (min-max beside it), plain and TLS "
        f"alternating. Machine: {machine()}."
    )
    if not args.no_write:
        RESULTS_MD.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_MD.write_text(markdown(rows, header, cpu_text) + _kept_notes())
        print(f"\nwritten to {RESULTS_MD}")
    failed = [e for v in variants for e in v.errors]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
