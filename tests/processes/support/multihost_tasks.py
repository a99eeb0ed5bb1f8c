"""Tasks for the multi-host test (tests/processes/test_multihost.py): its workers import this
module, and its driver (tests/processes/support/multihost_driver.py) submits them."""

from __future__ import annotations

import hashlib
import os
import time

import dista_runtime as dista

#: A result this large stays on the worker that made it (over 64 KiB): whoever reads it,
#: the driver or a task on the other worker, fetches it from that worker's object server.
LARGE = 96 * 1024


def payload(i: int, size: int) -> bytes:
    """What `work(i, size)` returns: ``size`` bytes that depend on ``i``."""
    block = hashlib.sha256(i.to_bytes(8, "little")).digest()
    return (block * (size // len(block) + 1))[:size]


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dista.task
def work(i: int, size: int, seconds: float) -> tuple[int, bytes]:
    """Sleep ``seconds``, then `payload(i, size)`, with the pid of the worker that ran it."""
    time.sleep(seconds)
    return os.getpid(), payload(i, size)


@dista.task
def digest(result: tuple[int, bytes]) -> tuple[int, str]:
    """The digest of a `work` result, read from wherever it lies; this worker's pid."""
    return os.getpid(), digest_of(result[1])
