"""The PNG of a side-by-side run: Dista's ratios to each peer, and every system against the best.

Top: per workload, Dista's ratio to each peer (> 1: Dista is better), on a log scale.
Bottom: per workload, each system's median relative to the best system's (1 = best; lower
bars are worse), so that a run without Dista still shows how the peers compare; workloads
only one system of several measured, and references (``cp``) and ratios measured inside a
probe, are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure  # no pyplot: no backend or display needed

COLORS = {"dista": "#d62728", "ray": "#1f77b4", "dask": "#ff7f0e", "ppe": "#2ca02c"}


def relative_to_best(medians: Mapping[str, float], higher_is_better: bool) -> dict[str, float]:
    """Each system's median over the best one's, oriented so that 1 is the best."""
    positive = {s: v for s, v in medians.items() if v > 0}
    if not positive:
        return {}
    if higher_is_better:
        best = max(positive.values())
        return {s: v / best for s, v in positive.items()}
    best = min(positive.values())
    return {s: best / v for s, v in positive.items()}


def _bars(ax: Axes, table: Mapping[str, Mapping[str, float]], series: Sequence[str]) -> None:
    workloads = [w for w in table if table[w]]
    width = 0.8 / max(len(series), 1)
    for i, name in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(workloads))]
        ys = [table[w].get(name, 0.0) for w in workloads]
        ax.bar(xs, ys, width, label=name, color=COLORS.get(name))
    ax.set_xticks(range(len(workloads)), workloads, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.legend(fontsize="small")


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def draw(data: Mapping[str, Any], png: Path) -> None:
    """Draw the JSON report `data` (see runner.report) into `png`."""
    systems: list[str] = data["config"]["systems"]
    peers = [s for s in systems if s != "dista"]
    # References and in-probe ratios (compared: False) compare no system with another
    better = {
        w["name"]: w["higher_is_better"] for w in data["workloads"] if w.get("compared", True)
    }
    fig = Figure(figsize=(11, 9))
    top, bottom = fig.subplots(2, 1)

    ratios: dict[str, dict[str, float]] = data["ratios"]
    if ratios:
        _bars(top, ratios, [p for p in peers if any(p in r for r in ratios.values())])
    else:
        _empty(top, "no Dista measurements to compare yet")
    top.set_title("Dista's ratio to each peer (> 1: Dista is better)")

    relative = {}
    for name, higher_is_better in better.items():
        cells = data["summary"].get(name, {})
        medians = {s: c["median"] for s, c in cells.items() if c["median"] is not None}
        if len(medians) >= min(2, len(systems)):  # one system alone is its own best
            relative[name] = relative_to_best(medians, higher_is_better)
    if any(relative.values()):
        _bars(bottom, relative, systems)
    else:
        _empty(bottom, "no measurements")
    bottom.set_title("Each system against the best one per workload (1 = best)")

    machine = data["machine"]
    fig.suptitle(
        f"{machine['cpu_count']} CPUs, Python {machine['python']}, "
        f"{data['config']['workers']} workers, rounds={data['config']['rounds']}"
        + (", quick" if data["config"]["quick"] else "")
    )
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
