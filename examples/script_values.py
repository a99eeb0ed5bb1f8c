"""A script's own classes, a value put once, and a readable remote failure.

    python examples/script_values.py

Everything here lives in the script (``__main__``): the dataclass, the exception class and
the tasks travel by value, as they would from a notebook. One 64 MiB array is stored in the
cluster once with `dista.put` and read by eight tasks; the driver sends it once, not eight
times. A task that fails raises the script's own exception class, with a traceback that
shows the script's lines and none of Dista's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import dista_runtime as dista


@dataclass
class Summary:
    part: int
    mean: float


class BadPart(Exception):
    def __init__(self, part: int) -> None:
        super().__init__(f"part {part} is out of range")
        self.part = part


@dista.task
def summarise(data: np.ndarray, part: int, parts: int) -> Summary:
    if not 0 <= part < parts:
        raise BadPart(part)
    chunk = np.array_split(data, parts)[part]
    return Summary(part, float(chunk.mean()))


def main() -> None:
    data = np.random.default_rng(0).random(8 << 20)  # 64 MiB of float64
    started = time.perf_counter()
    stored = dista.put(data)  # crosses to a worker once
    refs = [summarise.remote(stored, i, 8) for i in range(8)]
    first, _ = dista.wait(refs, num_returns=1, timeout=60)
    print(f"first done: {first[0].get(timeout=60)}")
    summaries = dista.get(refs, timeout=60)
    took = time.perf_counter() - started
    mean = np.mean([s.mean for s in summaries])
    print(f"8 parts of one put array in {took:.2f} s, overall mean {mean:.4f}")
    try:
        summarise.remote(stored, 9, 8).get(timeout=60)
    except BadPart as e:  # the script's own class, and a dista.TaskError too
        assert isinstance(e, dista.TaskError)
        print(f"caught BadPart for part {e.part}; the remote traceback:")
        print(e.remote_traceback)


if __name__ == "__main__":
    with dista.init(workers=2):
        main()
