"""One fuzz run against real processes, shared by `benchmarks/fuzz.py` (a million frames)
and `tests/processes/test_hostile.py` (twenty thousand): a cluster, the good driver running
its checked workload, then hostile connections until the frame budget or the time is
spent, the head's and workers' memory sampled every second before, during and after.

`run` returns a `Report`; `Report.failures` says what broke a target (a process that died,
a wrong or lost result, the head's memory over 2x its idle size during the run or 1.2x
after it); `Report.text` is the printed summary.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .hostile_cluster import Cluster, Death, GoodDriver
from .hostile_frames import Aim
from .hostile_peers import Budget, Tally, attack

__all__ = ["Report", "run"]

MIB = 1 << 20


@dataclass
class Report:
    seed: int
    connections: int
    seconds: float = 0.0
    tally: Tally = field(default_factory=Tally)
    rounds: int = 0
    checked: int = 0
    wrong: int = 0
    lost: int = 0
    problems: list[str] = field(default_factory=list)
    #: The good driver's slowest round, in seconds (a hang shows here before it is lost).
    slowest_round: float = 0.0
    #: The head's RSS: cold (no driver yet), idle (the driver warmed up, before the attack),
    #: the peak during the attack, 10 s after it, and `after` seconds after it: by default
    #: past the recovery grace (30 s), during which the head keeps what the hostile
    #: drivers that left own, for them to resume; the 1.2x target is checked there.
    head_cold: int = 0
    head_idle: int = 0
    head_peak: int = 0
    head_after: int = 0
    head_after_10: int = 0
    worker_idle: int = 0
    worker_peak: int = 0
    worker_after: int = 0
    deaths: list[Death] = field(default_factory=list)
    crash_file: Path | None = None
    after: float = 40.0
    during_limit: float = 2.0
    after_limit: float = 1.2

    def failures(self) -> list[str]:
        out = [f"{d.name} died (exit {d.code})" for d in self.deaths]
        if self.wrong:
            out.append(f"{self.wrong} wrong results")
        if self.lost:
            out.append(f"{self.lost} lost results")
        if self.head_idle and self.head_peak > self.during_limit * self.head_idle:
            out.append(f"head peak RSS {self.head_peak / self.head_idle:.2f}x idle")
        if self.head_idle and self.head_after > self.after_limit * self.head_idle:
            out.append(f"head RSS after {self.head_after / self.head_idle:.2f}x idle")
        return out

    def text(self) -> str:
        t = self.tally

        def ratio(n: int, of: int) -> str:
            return f"{n / MIB:.1f} MiB ({n / of:.2f}x)" if of else f"{n / MIB:.1f} MiB"

        lines = [
            (
                f"seed {self.seed}: {t.frames:,} frames ({t.bytes_sent / MIB:,.1f} MiB) in "
                f"{self.seconds:.1f} s over {self.connections} connections"
            ),
            (
                f"connections opened {t.opened:,}, closed by the peer {t.closed_by_peer:,}, "
                f"connect failures {t.connect_failures:,}"
            ),
            (
                f"frames received {t.frames_received:,} ({t.bytes_received / MIB:,.1f} MiB), "
                f"error frames {t.error_frames:,}"
            ),
            (
                f"good driver: {self.rounds} rounds, results checked {self.checked:,}, "
                f"wrong {self.wrong}, lost {self.lost}; slowest round {self.slowest_round:.2f} s"
            ),
            (
                f"head RSS: cold {self.head_cold / MIB:.1f} MiB, idle {self.head_idle / MIB:.1f} MiB,"
                f" peak {ratio(self.head_peak, self.head_idle)}, "
                + (
                    f"10 s after {ratio(self.head_after_10, self.head_idle)}, "
                    if self.head_after_10
                    else ""
                )
                + f"{self.after:g} s after {ratio(self.head_after, self.head_idle)}"
            ),
            (
                f"worker RSS (largest): idle {self.worker_idle / MIB:.1f} MiB, "
                f"peak {ratio(self.worker_peak, self.worker_idle)}, "
                f"{self.after:g} s after {ratio(self.worker_after, self.worker_idle)}"
            ),
        ]
        for d in self.deaths:
            lines += [f"DIED: {d.name} exit {d.code}; its last lines:", d.tail]
        if not self.deaths:
            lines.append("processes died: none")
        lines += [f"  problem: {p}" for p in self.problems[:20]]
        lines.append("what the attackers got back (kind: count):")
        lines += [f"  {k}: {n:,}" for k, n in sorted(t.kinds_received.items())]
        lines.append("the most common error frames:")
        lines += [f"  {n:7,}  {text}" for text, n in t.errors.most_common(25)]
        if self.crash_file is not None:
            lines.append(f"the last sessions' frames: {self.crash_file}")
        failures = self.failures()
        lines.append("RESULT: " + ("FAIL: " + "; ".join(failures) if failures else "ok"))
        return "\n".join(lines)


class _Sampler(threading.Thread):
    """Every second: the head's and workers' RSS, and whether anyone died."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0):
            self.samples.append((time.monotonic(), self.cluster.rss()))

    def peak(self, since: float, until: float) -> tuple[int, int]:
        """The head's and the largest worker's highest RSS in [since, until]."""
        head = worker = 0
        for t, rss in self.samples:
            if since <= t <= until:
                head = max(head, rss.get("head", 0))
                worker = max([worker, *(v for k, v in rss.items() if k.startswith("worker"))])
        return head, worker


def _largest_worker(rss: dict[str, int]) -> int:
    return max((v for k, v in rss.items() if k.startswith("worker")), default=0)


def run(
    logs: Path,
    *,
    frames: int,
    connections: int,
    seconds: float,
    seed: int,
    workers: int = 3,
    after: float = 40.0,
    head_args: tuple[str, ...] = (),
    impersonate: bool = False,
    allow_stop: bool = False,
    big_lengths: bool = True,
    checkpoints: bool = True,
    say: Callable[[str], object] = lambda _: None,
) -> Report:
    report = Report(seed, connections, after=after)
    env = {"DISTA_CHECKPOINT_URI": str(logs / "checkpoints") if checkpoints else ""}
    cluster = Cluster(logs, workers=workers, head_args=head_args, env=env)
    sampler = _Sampler(cluster)
    try:
        status = cluster.wait_for_workers()
        servers = cluster.servers(status)
        time.sleep(1.0)
        report.head_cold = cluster.rss()["head"]
        driver = GoodDriver(cluster)
        first = driver.wait_for("number", 60)
        deadline = time.monotonic() + 60
        while len(driver.rounds()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        status = cluster.status()
        idle = []
        for _ in range(3):
            time.sleep(0.5)
            idle.append(cluster.rss())
        report.head_idle = max(r["head"] for r in idle)
        report.worker_idle = max(_largest_worker(r) for r in idle)
        aim = Aim(
            victim_number=first["number"],
            victim_ids=list(first["pinned"]),
            registry=cluster.registry_of(status, first["number"]),
            servers=servers,
            impersonate=impersonate,
            allow_stop=allow_stop,
            big_lengths=big_lengths,
        )
        say(
            f"cluster up: head {cluster.address} idle {report.head_idle / MIB:.1f} MiB, "
            f"object servers {', '.join(map(str, servers))}, good driver {aim.victim_number}, "
            f"registry {aim.registry:#x}; attacking"
        )
        sampler.start()
        began = time.monotonic()
        budget = Budget(frames, began + seconds)
        tally = report.tally
        targets = [(s.host, s.port) for s in servers]
        progress = threading.Thread(
            target=_progress, args=(tally, budget, cluster, say), daemon=True
        )
        progress.start()
        asyncio.run(
            attack((cluster.host, cluster.port), targets, connections, seed, aim, budget, tally)
        )
        ended = time.monotonic()
        report.seconds = ended - began
        budget.frames = 0  # stops the progress line
        say(
            f"attack over: {tally.frames:,} frames in {report.seconds:.1f} s; {after:g} s of quiet"
        )
        time.sleep(after)
        report.head_peak, report.worker_peak = sampler.peak(began, ended + 1.0)
        report.head_after_10 = sampler.peak(ended + 9.5, ended + 10.5)[0]
        final = cluster.rss()
        report.head_after = final["head"]
        report.worker_after = _largest_worker(final)
        report.deaths = cluster.deaths()
        cluster.expected_dead.add("driver")
        if cluster.head.poll() is None:
            summary = driver.stop()
            report.rounds, report.checked = summary["rounds"], summary["checked"]
            report.wrong, report.lost = summary["wrong"], summary["lost"]
        else:
            rounds = driver.rounds()
            report.rounds = len(rounds)
            report.lost = 1
        report.slowest_round = max((line["seconds"] for line in driver.rounds()), default=0.0)
        for line in driver.rounds():
            report.problems += [f"round {line['round']}: {p}" for p in line.get("problems", [])]
        seen = {d.name for d in report.deaths}
        report.deaths += [d for d in cluster.deaths() if d.name not in seen]
        if report.failures():
            report.crash_file = logs / f"sessions-{seed}.txt"
            _write_sessions(report.crash_file, seed, tally)
    finally:
        sampler.stopped.set()
        cluster.close()
    return report


def _progress(
    tally: Tally, budget: Budget, cluster: Cluster, say: Callable[[str], object]
) -> None:
    last = time.monotonic()
    while not budget.spent():
        time.sleep(5.0)
        rss = cluster.rss()
        now = time.monotonic()
        say(
            f"  {tally.frames:,} frames, {tally.opened:,} connections, "
            f"{tally.error_frames:,} error frames; head {rss.get('head', 0) / MIB:.1f} MiB, "
            f"workers {_largest_worker(rss) / MIB:.1f} MiB ({now - last:.0f} s)"
        )
        last = now


def _write_sessions(path: Path, seed: int, tally: Tally) -> None:
    """The last sessions' frames, in hex: what to replay against a head to reproduce."""
    with open(path, "w") as out:
        out.write(f"seed {seed}: the last {len(tally.recent)} sessions, oldest first\n")
        for target, index, n, sent in tally.recent:
            out.write(f"\n{target} connection {index} session {n} ({len(sent)} frames)\n")
            out.writelines(
                data[:256].hex() + ("..." if len(data) > 256 else "") + "\n" for data in sent
            )
