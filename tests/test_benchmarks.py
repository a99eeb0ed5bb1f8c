"""The side-by-side benchmark's bookkeeping, on made-up measurements: no peer is needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import runner
from benchmarks.runner import NOT_APPLICABLE, NOT_INSTALLED, OK, UNAVAILABLE, Result


def _results() -> list[Result]:
    made_up = {
        ("dista", "noop"): [9_000.0, 10_000.0, 12_000.0],  # tasks/s: higher is better
        ("ray", "noop"): [4_000.0, 5_000.0, 6_000.0],
        ("dista", "start"): [0.5, 0.4, 0.6],  # s: lower is better
        ("ray", "start"): [2.0, 2.5, 3.0],
        ("ppe", "start"): [0.1, 0.1, 0.3],
    }
    results = [
        Result(system, workload, rnd, OK, value)
        for (system, workload), values in made_up.items()
        for rnd, value in enumerate(values, 1)
    ]
    results += [Result("dista", "actor", rnd, NOT_APPLICABLE) for rnd in (1, 2, 3)]
    results += [Result("dask", w, 1, NOT_INSTALLED) for w in ("noop", "start", "actor")]
    results += [Result("ppe", "noop", 1, UNAVAILABLE), Result("ppe", "noop", 2, OK, 7_000.0)]
    return results


@pytest.mark.timeout(5)
def test_medians_ratios_and_table() -> None:
    summary = runner.summarize(_results())
    assert summary["noop"]["dista"] == runner.Cell(10_000.0, 3, OK)
    assert summary["start"]["ppe"].median == pytest.approx(0.1)
    assert summary["noop"]["ppe"] == runner.Cell(7_000.0, 1, OK)  # a failed round is left out
    assert summary["actor"]["dista"] == runner.Cell(None, 0, NOT_APPLICABLE)
    assert summary["noop"]["dask"].status == NOT_INSTALLED

    # > 1 means Dista is better, whichever way the unit goes
    assert runner.ratio(10.0, 5.0, higher_is_better=True) == 2.0
    assert runner.ratio(0.5, 2.0, higher_is_better=False) == 4.0
    assert runner.ratio(None, 2.0, higher_is_better=False) is None
    assert runner.ratio(1.0, 0.0, higher_is_better=True) is None
    rel = runner.ratios(summary, ["ray", "dask", "ppe"])
    assert rel["noop"] == {"ray": 2.0, "ppe": pytest.approx(10 / 7)}
    assert rel["start"] == {"ray": 5.0, "ppe": pytest.approx(0.2)}
    assert "actor" not in rel

    workloads = [runner.BY_NAME[n] for n in ("start", "noop", "actor")]
    table = runner.format_table(summary, ["dista", "ray", "dask", "ppe"], workloads)
    lines = table.splitlines()
    assert " ".join(lines[0].split()) == "workload unit dista ray dask ppe vs ray vs dask vs ppe"
    assert " ".join(lines[2].split()) == "start s 0.5 2.50 not installed 0.1 5.00x - 0.20x"
    assert lines[3].split()[:4] == ["noop", "tasks/s", "10,000", "5,000"]
    assert lines[4].split()[:3] == ["actor", "calls/s", "n/a"]
    assert "> 1 means Dista is better" in table

    assert [w.name for w in runner.select_workloads(["queued"])] == [
        "queued_mem",
        "queued_submit",
        "queued_drain",
    ]
    assert "queued_mem" not in {w.name for w in runner.select_workloads(None)}
    assert runner.groups_of(runner.select_workloads(["big1g", "start"])) == ["startup", "data"]
    with pytest.raises(ValueError, match="nope"):
        runner.select_workloads(["nope"])


@pytest.mark.slow
def test_quick_pass_with_the_process_pool(tmp_path: Path) -> None:
    """The whole harness, child processes included, on the one peer the stdlib has."""
    out = tmp_path / "out.json"
    command = [sys.executable, "-m", "benchmarks", "--systems", "ppe", "--quick", "--rounds", "1"]
    command += ["--only", "start,idle_mem,noop,chain,actor", "--json", str(out)]
    command += ["--png", str(tmp_path / "out.png")]
    done = subprocess.run(
        command, cwd=runner.ROOT, capture_output=True, text=True, timeout=100, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(out.read_text())["summary"]
    assert {name: cells["ppe"]["status"] for name, cells in summary.items()} == {
        "start": OK,
        "idle_mem": OK,
        "noop": OK,
        "chain": OK,
        "actor": NOT_APPLICABLE,
    }
    assert summary["noop"]["ppe"]["median"] > 0
