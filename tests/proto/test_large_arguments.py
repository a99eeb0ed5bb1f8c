"""A large argument lands once: read into place in the head and the worker, forwarded as is.

A task frame of 1 MiB or more arriving at the head (from a driver) or at a worker (from the
head) is read into one buffer from the role's ``allocate`` instead of a growing read
buffer; the head forwards the task frame to a worker straight from that buffer.
"""

from __future__ import annotations

import random

from dista_proto import Address, Connection, Head, Hello, Role, RunTask, Task, Worker, Write
from dista_proto import frame as F

NUMBER = 5


def _read_into(core: Head | Worker, link: int, data: bytes, rng: random.Random) -> None:
    """Deliver ``data`` the way a BufferedProtocol does: reads of random sizes, in place."""
    view = memoryview(data)
    while view:
        buffer = core.get_buffer(link)
        n = min(len(buffer), len(view), rng.choice([1, 100, 64 << 10, 1 << 20, 8 << 20]))
        buffer[:n] = view[:n]
        view = view[n:]
        core.buffer_updated(link, n, 0)


class Allocations:
    def __init__(self) -> None:
        self.buffers: list[bytearray] = []

    def __call__(self, n: int) -> bytearray:
        self.buffers.append(bytearray(n))
        return self.buffers[-1]


def _bytes_to(decisions: list[object], link: int) -> tuple[bytes, list[object]]:
    views: list[object] = []
    out = bytearray()
    for d in decisions:
        if isinstance(d, Write) and d.link == link:
            for b in d.buffers:
                views.append(b)
                out += b
    return bytes(out), views


def test_the_head_lands_a_large_argument_and_forwards_it_as_it_lies() -> None:
    rng = random.Random(1)
    allocations = Allocations()
    head = Head(epoch=1, first_number=NUMBER, allocate=allocations, worker_slots=1, prefetch=0)
    worker_link = head.connection_made(0)
    driver_link = head.connection_made(0)
    worker = Connection(Role.WORKER)
    worker.send(Hello(F.ROLE_WORKER, 9, Address("127.0.0.1", 1)))
    _read_into(head, worker_link, b"".join(worker.data_to_send()), rng)
    driver = Connection(Role.DRIVER)
    driver.send(Hello(F.ROLE_DRIVER, 9))
    argument = rng.randbytes(3 << 20)
    driver.send(Task(NUMBER << 40 | 1, 7, argument))
    _read_into(head, driver_link, b"".join(bytes(b) for b in driver.data_to_send()), rng)

    assert [len(b) for b in allocations.buffers] == [len(argument)]  # the payload, once
    sent, views = _bytes_to(head.decisions(), worker_link)
    # The payload leaves from the buffer it landed in, not a copy.
    assert any(isinstance(v, memoryview) and v.obj is allocations.buffers[0] for v in views)
    worker.receive_data(sent)
    events = worker.next_events()
    (task,) = [e for e in events if isinstance(e, Task)]
    assert task.object_id == NUMBER << 40 | 1 and bytes(task.argument) == argument


def test_a_worker_lands_a_large_argument_in_a_buffer_from_allocate() -> None:
    rng = random.Random(2)
    allocations = Allocations()
    core = Worker(registry_hash=9, address=Address("127.0.0.1", 1), allocate=allocations)
    core.start(0)
    core.decisions()
    head = Connection(Role.HEAD)
    hello = Connection(Role.WORKER)
    hello.send(Hello(F.ROLE_WORKER, 9, Address("127.0.0.1", 1)))
    head.receive_data(b"".join(hello.data_to_send()))
    head.next_events()
    argument = rng.randbytes(2 << 20)
    head.send(Task(NUMBER << 40 | 1, 7, argument))
    _read_into(core, 0, b"".join(bytes(b) for b in head.data_to_send()), rng)
    (run,) = [d for d in core.decisions() if isinstance(d, RunTask)]
    assert bytes(run.argument or b"") == argument
    assert len(allocations.buffers) == 1
    assert isinstance(run.argument, memoryview) and run.argument.obj is allocations.buffers[0]


def test_small_frames_do_not_allocate() -> None:
    allocations = Allocations()
    head = Head(epoch=1, first_number=NUMBER, allocate=allocations, worker_slots=1, prefetch=0)
    link = head.connection_made(0)
    driver = Connection(Role.DRIVER)
    driver.send(Hello(F.ROLE_DRIVER, 9))
    for i in range(100):
        driver.send(Task(NUMBER << 40 | (i + 1), 7, b"x" * 1000))
    _read_into(head, link, b"".join(bytes(b) for b in driver.data_to_send()), random.Random(3))
    assert allocations.buffers == []
    assert head.stats().pending == 100
