"""Encoding values, and the buffers large ones live in (`_memory.allocate`).

No cluster here: the encoded form, the allocator's buffers (zeroed, writable, mapped from
`MAP_FROM` bytes on and faulted in ahead of their writer: `ready` never offers a byte not
yet faulted in, and faults the next chunk itself rather than wait), and a large array
decoded from a buffer the fetcher filled: backed by that buffer (not copied), writable,
alive as long as the array is.
"""

from __future__ import annotations

import gc
import mmap
import pickle
import time

import numpy as np
import pytest

import dista_proto as dp
from dista_proto import frame as F
from dista_runtime._values import memory as _memory
from dista_runtime._values.codec import MAP_FROM, allocate, decode, encode
from dista_runtime._values.memory import AHEAD_MIN, CHUNK, ready, write_into


@pytest.mark.parametrize("n", [0, 1, 4096, MAP_FROM - 1])
def test_small_buffers_are_bytearrays(n: int) -> None:
    buffer = allocate(n)
    assert type(buffer) is bytearray and buffer == bytes(n)


@pytest.mark.parametrize("n", [MAP_FROM, MAP_FROM + 1, 5 << 20])
def test_large_buffers_are_mapped_zeroed_and_writable(n: int) -> None:
    buffer = allocate(n)
    assert isinstance(buffer, memoryview)
    assert isinstance(buffer.obj, mmap.mmap)
    assert len(buffer) == n and buffer.format == "B" and not buffer.readonly
    assert buffer[0] == 0 and buffer[-1] == 0 and buffer.tobytes().count(0) == n
    buffer[0] = 7
    buffer[-1] = 9
    assert buffer[0] == 7 and buffer[-1] == 9


def test_without_populate_write_a_map_is_populated_when_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kernels before 5.14 refuse MADV_POPULATE_WRITE: MAP_POPULATE does the faulting."""
    monkeypatch.setattr(_memory, "_populate_write", False)
    buffer = allocate(2 << 20)
    assert isinstance(buffer, memoryview) and len(buffer) == 2 << 20
    buffer[-1] = 1
    assert buffer[-1] == 1


def test_a_map_nobody_writes_is_not_faulted_in() -> None:
    """A frame announced but never sent costs its receiver next to nothing: the filler
    stays within reach of the writer (as far ahead as it has written), not the whole map."""
    buffer = allocate(256 << 20)
    assert isinstance(buffer, memoryview)
    time.sleep(0.3)
    filling = _memory._filling[id(buffer.obj)]
    assert filling.done == AHEAD_MIN
    # A writer 8 MiB in: the filler runs up to 8 MiB ahead of it, no further.
    ready(buffer[8 << 20 :])
    time.sleep(0.3)
    assert 16 << 20 <= filling.done <= (16 << 20) + CHUNK
    del filling, buffer


def test_a_large_map_is_faulted_in_ahead_of_its_writer() -> None:
    size = 5 * CHUNK + 123
    buffer = allocate(size)
    assert isinstance(buffer, memoryview)
    first = ready(buffer)
    assert AHEAD_MIN <= len(first) <= size  # faulted in before it is returned
    # Anywhere in the map, ready offers at least one byte, never past the view.
    for start in (0, CHUNK - 1, 3 * CHUNK + 5, size - 1):
        view = ready(buffer[start : start + 10])
        assert 1 <= len(view) <= 10
    data = bytes(range(256)) * (size // 256)
    write_into(buffer, data)
    assert buffer[: len(data)] == data
    deadline = time.monotonic() + 10
    while id(buffer.obj) in _memory._filling:  # the filler lets go of it when done
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert ready(buffer) is buffer


def test_a_writer_faults_in_what_the_filler_has_not_reached() -> None:
    """No filler thread at all: the writer faults every chunk in itself, in order."""
    size = 3 * CHUNK + 1
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    filling = _memory._Filling(region, _memory._address(region), size, 0)
    assert filling.upto(0) == CHUNK
    assert filling.upto(2 * CHUNK + 7) == 3 * CHUNK
    assert filling.upto(size - 1) == size
    assert filling.claim(size) is None


def test_ready_leaves_other_views_alone() -> None:
    for other in (memoryview(bytearray(10)), memoryview(b"read-only"), memoryview(b"")):
        assert ready(other) is other


def test_more_than_the_address_space_is_a_memory_error() -> None:
    with pytest.raises(MemoryError):
        allocate(1 << 60)


def test_a_large_array_round_trips_through_a_mapped_buffer() -> None:
    array = np.arange(1 << 20, dtype=np.uint32)  # 4 MiB: one out-of-band buffer
    encoded = encode(array)
    assert isinstance(encoded, memoryview) and isinstance(encoded.obj, mmap.mmap)
    back = decode(encoded)
    assert np.array_equal(back, array)
    assert np.shares_memory(back, np.frombuffer(encoded, dtype=np.uint8))  # not copied
    assert back.flags.writeable


def test_small_values_stay_one_pickle() -> None:
    for value in [None, 1, "text", b"x" * 100, {"a": [1, 2]}, np.zeros(10)]:
        encoded = encode(value)
        assert type(encoded) in (bytes, bytearray)
        if not isinstance(value, np.ndarray):
            assert encoded == pickle.dumps(value, protocol=5)
        back = decode(encoded)
        if isinstance(value, np.ndarray):
            assert np.array_equal(back, value)
        else:
            assert back == value


def test_an_array_fetched_in_parts_is_backed_by_the_parts_buffer() -> None:
    """What the driver does with a large result: parts land in one mapped buffer, which the
    decoded array then uses as it lies, and which lives as long as the array does."""
    array = np.arange(3 << 20, dtype=np.uint8)
    encoded = encode(array)
    parts: F.Parts[bytearray | memoryview] = F.Parts(allocate)
    view = memoryview(encoded).cast("B")
    step = 1 << 20
    for offset in range(0, len(view), step):
        chunk = view[offset : offset + step]
        landing = parts.reserve(len(view), offset, len(chunk))
        landing[:] = chunk  # as a socket read into the view would
        parts.add_part(len(view), offset, landing)
    assert parts.whole
    value = parts.take()
    assert isinstance(value, memoryview) and isinstance(value.obj, mmap.mmap)
    back = decode(value)
    del value, parts, encoded, view, landing, chunk
    gc.collect()
    assert np.array_equal(back, array)
    back[0] = 200  # writable: the user owns it
    assert back[0] == 200


def test_a_value_stored_as_a_mapped_buffer_is_served_in_parts() -> None:
    worker = dp.Worker(registry_hash=1, address=dp.Address("127.0.0.1", 9000))
    worker.start(0)
    worker.decisions()
    value = encode(np.ones(3 << 20, dtype=np.uint8))
    assert isinstance(value, memoryview)
    worker.store[5] = value
    link = worker.connection_made(0)
    worker.receive_data(link, dp.encode_event(dp.Fetch(5, 1 << 20)), 0)
    (write,) = [d for d in worker.decisions() if isinstance(d, dp.Write)]
    conn = dp.Connection(dp.Role.FETCHER)
    for buffer in write.buffers:
        conn.receive_data(bytes(buffer))
    got = bytearray()
    for event in conn.next_events():
        assert isinstance(event, dp.Part) and event.offset == len(got)
        got += event.data
    assert got == value
