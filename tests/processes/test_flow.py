"""Flow control in the head, and a driver on an asyncio app's own loop."""

from __future__ import annotations

import asyncio
import socket
import threading

from dista_asyncio import AsyncioLoop, connect, wait

import dista_proto as dp
import dista_runtime as dista
from dista_runtime._hosts.head import start_head
from dista_runtime._net.streams import HIGH_WATER
from tests.support import tasks
from tests.support.cluster import CliHead, task_modules

RESULT = 32 * 1024  # inline results: each one the head must forward to the driver


async def fake_worker(port: int, stop: asyncio.Event) -> None:
    """A worker that answers every task at once with a 32 KiB inline result."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    conn = dp.Connection(dp.Role.WORKER)
    conn.send(dp.Hello(dp.frame.ROLE_WORKER, 0, dp.Address("127.0.0.1", 1)))
    writer.writelines(conn.data_to_send())
    payload = bytes(RESULT)
    while not stop.is_set():
        try:
            data = await asyncio.wait_for(reader.read(1 << 16), 0.1)
        except TimeoutError:
            continue
        if not data:
            break
        conn.receive_data(data)
        for event in conn.next_events():
            if isinstance(event, dp.Task):
                conn.send(dp.Result(event.object_id, payload))
        writer.writelines(conn.data_to_send())
        await writer.drain()
    writer.close()


def flood(port: int, tasks_to_send: int, sent: list[int]) -> socket.socket:
    """A driver that submits and never reads: the head must not buffer for it forever."""
    sock = socket.create_connection(("127.0.0.1", port))
    conn = dp.Connection(dp.Role.DRIVER)
    conn.send(dp.Hello(dp.frame.ROLE_DRIVER, 0))
    sock.sendall(b"".join(conn.data_to_send()))
    while True:
        conn.receive_data(sock.recv(1 << 16))
        events = conn.next_events()
        if events:
            break
    welcome = events[0]
    assert isinstance(welcome, dp.Welcome)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)

    def run() -> None:
        try:
            for n in range(1, tasks_to_send + 1):
                conn.send(dp.Task(welcome.number << 40 | n, 1, b"x"))
                if n % 100 == 0:
                    sock.sendall(b"".join(conn.data_to_send()))
                    sent[0] = n
        except OSError:
            pass

    threading.Thread(target=run, daemon=True).start()
    return sock


def test_a_slow_driver_cannot_make_the_head_buffer_without_bound() -> None:
    async def main() -> tuple[int, int, int]:
        server = start_head(
            AsyncioLoop(asyncio.get_running_loop()), "127.0.0.1", 0, worker_slots=4
        )
        port = server.address[1]
        stop = asyncio.Event()
        worker = asyncio.create_task(fake_worker(port, stop))
        sent = [0]
        sock = await asyncio.to_thread(flood, port, 100_000, sent)
        peak = 0
        for _ in range(30):  # 3 s of flooding
            await asyncio.sleep(0.1)
            for transport in server.transports.values():
                peak = max(peak, transport.get_write_buffer_size())
        answered = server.head.stats().objects
        stop.set()
        sock.close()
        await worker
        server.stop("test over")
        await wait(server.closed)
        return peak, answered, sent[0]

    peak, answered, sent = asyncio.run(main())
    # Without flow control the head would hold ~32 KiB per answered task for the driver.
    assert sent > 1000, "the flood never got going"
    assert peak <= HIGH_WATER + (1 << 20), f"the head buffered {peak} bytes for a slow peer"
    assert answered * RESULT > 4 * HIGH_WATER or sent < 100_000


def test_asyncio_app_awaits_refs_on_its_own_loop() -> None:
    head = CliHead(imports=tuple(task_modules()))  # this process is the driver
    try:
        host, port = head.address.rsplit(":", 1)

        async def app() -> list[int]:
            before = {t.name for t in threading.enumerate()}
            async with connect(f"{host}:{port}"):
                one = await tasks.add.remote(1, 2)
                many = await asyncio.gather(*(tasks.add.remote(i, one) for i in range(20)))
                assert {t.name for t in threading.enumerate()} <= before  # no I/O thread
            await asyncio.sleep(0.05)
            return [one, *many]

        values = asyncio.run(app())
        assert values == [3, *(i + 3 for i in range(20))]
        assert dista.ObjectRef  # the refs were ordinary ObjectRefs
    finally:
        head.close()
