"""The in-memory link between a local driver and its head: order, flow control, closing."""

from __future__ import annotations

import asyncio

from dista_runtime._net.memlink import memory_link


class Recorder(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.made = False
        self.lost = False
        self.paused = 0
        self.resumed = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    def pause_writing(self) -> None:
        self.paused += 1

    def resume_writing(self) -> None:
        self.resumed += 1


class Buffered(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.buffer = bytearray(7)  # small: a write lands over several buffers

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buffer)

    def buffer_updated(self, nbytes: int) -> None:
        self.data += self.buffer[:nbytes]


async def _turns(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def test_bytes_arrive_in_order_on_a_later_turn_and_the_writer_keeps_its_buffer() -> None:
    async def main() -> None:
        a, b = Recorder(), Recorder()
        ta, tb = memory_link(asyncio.get_running_loop().call_soon, a, b)
        assert a.made and b.made
        buffer = bytearray(b"one ")
        ta.write(buffer)
        buffer[:] = b"XXXX"  # reused at once, as after a socket write
        ta.write(memoryview(b"two three")[4:])
        assert b.data == b""  # not re-entrant: delivered on the loop's next turn
        await _turns()
        assert b.data == b"one three"
        tb.write(b"back")
        await _turns()
        assert a.data == b"back"

    asyncio.run(main())


def test_a_buffered_protocol_reads_into_place() -> None:
    async def main() -> None:
        a, b = Recorder(), Buffered()
        ta, _ = memory_link(asyncio.get_running_loop().call_soon, a, b)
        ta.write(b"0123456789" * 10)
        await _turns()
        assert b.data == b"0123456789" * 10

    asyncio.run(main())


def test_the_writer_pauses_over_the_mark_and_resumes_when_the_reader_takes() -> None:
    async def main() -> None:
        a, b = Recorder(), Recorder()
        ta, tb = memory_link(asyncio.get_running_loop().call_soon, a, b)
        ta.set_write_buffer_limits(high=100, low=10)
        tb.pause_reading()
        for _ in range(5):
            ta.write(b"x" * 30)
        assert a.paused == 1 and ta.get_write_buffer_size() == 150
        await _turns()
        assert b.data == b""  # not reading
        tb.resume_reading()
        await _turns()
        assert len(b.data) == 150 and a.resumed == 1 and ta.get_write_buffer_size() == 0

    asyncio.run(main())


def test_closing_one_end_delivers_what_was_written_then_closes_both() -> None:
    async def main() -> None:
        a, b = Recorder(), Recorder()
        ta, tb = memory_link(asyncio.get_running_loop().call_soon, a, b)
        ta.write(b"last words")
        ta.close()
        assert ta.is_closing()
        ta.write(b"ignored")
        await _turns()
        assert b.data == b"last words"
        assert a.lost and b.lost and tb.is_closing()

    asyncio.run(main())
