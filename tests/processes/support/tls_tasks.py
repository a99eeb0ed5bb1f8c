"""Tasks for tests/processes/test_tls.py, and its driver (``python -m tests.processes.support.tls_tasks
HOST:PORT``): small tasks, a chain of refs, and a result large enough to stay on its
worker, so that the driver fetches it from the object server (a second TLS link)."""

from __future__ import annotations

import hashlib
import sys

import dista_runtime as dista

#: Over the inline limit: stored on the worker and fetched from its object server.
BIG = 3 << 20


@dista.task
def square(x: int) -> int:
    return x * x


@dista.task
def total(values: list[int]) -> int:
    return sum(values)


@dista.task
def blob(size: int) -> bytes:
    return hashlib.sha256(str(size).encode()).digest() * (size // 32)


def main(address: str) -> int:
    with dista.init(address=address):
        squares = [square.remote(i) for i in range(200)]
        assert dista.get(squares) == [i * i for i in range(200)]
        assert total.remote(squares).get(timeout=30) == sum(i * i for i in range(200))
        data = blob.remote(BIG).get(timeout=30)
        assert data == hashlib.sha256(str(BIG).encode()).digest() * (BIG // 32)
    print("tls driver: all right", flush=True)
    return 0


if __name__ == "__main__":
    # By its module name, as the workers import it: defined in ``__main__`` its tasks would
    # travel by value, which runs only on workers of the driver's registry.
    from tests.processes.support import tls_tasks  # noqa: PLW0406

    sys.exit(tls_tasks.main(sys.argv[1]))
