"""Large values in memory files, and mailboxes that hand them over on one host
(`dista_runtime._values.shared`): what a fetcher maps is the value, read-only, zero-copy;
nothing that is not a sealed memory file of the right size and ticket is ever mapped; no
descriptor or map outlives what holds it."""

from __future__ import annotations

import array
import fcntl
import os
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from dista_runtime._values import reaper, shared
from dista_runtime._values.codec import decode, encode
from dista_runtime._values.shared import SHARE_FROM, SameHost, is_shared, keep_values_shared

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="memory files and abstract sockets: Linux"
)


def _open_fds() -> int:
    assert reaper.settled()  # descriptors given back off the thread are closed by now
    return len(os.listdir("/proc/self/fd"))


def _memfd_maps() -> int:
    with open("/proc/self/maps") as maps:
        return sum("memfd:dista-object" in line for line in maps)


@pytest.fixture
def sharing() -> Iterator[None]:
    keep_values_shared()
    try:
        yield
    finally:
        keep_values_shared(False)


@pytest.fixture
def hosts() -> Iterator[tuple[SameHost, SameHost]]:
    a, b = SameHost.create(), SameHost.create()
    assert a is not None and b is not None
    yield a, b
    a.close()
    b.close()


def test_a_large_value_is_a_sealed_read_only_memory_file(sharing: None) -> None:
    array_ = np.arange(SHARE_FROM, dtype=np.int32)
    value = encode(array_)
    assert is_shared(value)
    assert isinstance(value, memoryview) and value.readonly
    out = decode(value)
    assert np.array_equal(out, array_) and not out.flags.writeable
    small = encode(np.arange(10))
    assert not is_shared(small)


def test_without_sharing_values_stay_private() -> None:
    value = encode(np.arange(SHARE_FROM, dtype=np.int32))
    assert not is_shared(value)


def test_large_bytes_travel_out_of_band_and_come_back_bytes(sharing: None) -> None:
    data = os.urandom(SHARE_FROM + 17)
    value = encode(data)
    assert is_shared(value)
    out = decode(value)
    assert type(out) is bytes and out == data


def test_a_shared_value_is_mapped_by_another_host_zero_copy(
    sharing: None, hosts: tuple[SameHost, SameHost]
) -> None:
    server, fetcher = hosts
    original = np.random.default_rng(1).random(SHARE_FROM // 8 * 3)
    value = encode(original)
    ticket = server.share(7, value, fetcher.mailbox)
    assert ticket is not None
    mapped = fetcher.take(7, len(value), ticket)
    assert mapped is not None and fetcher.mapped == 1
    out = decode(mapped)
    assert np.array_equal(out, original) and not out.flags.writeable
    del value  # the server frees its copy: the fetcher's map keeps the memory
    assert float(out.sum()) == pytest.approx(float(original.sum()))


def test_descriptors_of_a_turn_go_in_one_datagram_before_the_frames(
    sharing: None, hosts: tuple[SameHost, SameHost]
) -> None:
    server, fetcher = hosts
    values = [encode(np.full(SHARE_FROM, k, dtype=np.uint8)) for k in range(5)]
    tickets = [server.share(k, v, fetcher.mailbox) for k, v in enumerate(values)]
    assert all(t is not None for t in tickets)
    assert server.queued  # the first went at once, to learn the mailbox is here
    server.flush()
    assert not server.queued
    for k, ticket in reversed(list(enumerate(tickets))):  # in any order
        assert ticket is not None
        got = fetcher.take(k, len(values[k]), ticket)
        assert got is not None and int(decode(got)[-1]) == k


def test_a_mailbox_not_on_this_host_is_not_sent_to_again(
    sharing: None, hosts: tuple[SameHost, SameHost]
) -> None:
    server, _ = hosts
    value = encode(np.zeros(SHARE_FROM, dtype=np.uint8))
    before = _open_fds()
    assert server.share(1, value, 0xDEAD) is None
    assert server.share(2, value, 0xDEAD) is None and not server.queued
    assert _open_fds() == before


def test_a_private_value_is_not_shared(hosts: tuple[SameHost, SameHost]) -> None:
    server, fetcher = hosts
    assert server.share(1, encode(np.zeros(SHARE_FROM, dtype=np.uint8)), fetcher.mailbox) is None
    assert server.share(1, b"x" * SHARE_FROM, fetcher.mailbox) is None


def test_a_wrong_ticket_size_or_object_is_not_taken(
    sharing: None, hosts: tuple[SameHost, SameHost]
) -> None:
    server, fetcher = hosts
    value = encode(np.zeros(SHARE_FROM, dtype=np.uint8))
    ticket = server.share(9, value, fetcher.mailbox)
    assert ticket is not None
    assert fetcher.take(9, len(value), bytes(16)) is None
    assert fetcher.take(9, len(value) + 1, ticket) is None  # taken, and refused
    ticket = server.share(9, value, fetcher.mailbox)
    server.flush()
    assert ticket is not None and fetcher.take(8, len(value), ticket) is None


def _send_raw(fetcher: SameHost, fd: int, ticket: bytes, oid: int) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK) as sock:
        sock.sendmsg(
            [ticket + struct.pack("<Q", oid)],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))],
            0,
            shared._name(fetcher.mailbox),
        )


def test_what_is_not_a_sealed_memory_file_is_never_mapped(
    hosts: tuple[SameHost, SameHost],
) -> None:
    _, fetcher = hosts
    before = _open_fds()
    read, write = os.pipe()
    _send_raw(fetcher, read, b"p" * 16, 1)  # a pipe: no seals at all
    unsealed = os.memfd_create("x", os.MFD_ALLOW_SEALING)
    os.ftruncate(unsealed, 4096)
    _send_raw(fetcher, unsealed, b"u" * 16, 2)  # could shrink under the map
    sealed = os.memfd_create("y", os.MFD_ALLOW_SEALING)
    os.ftruncate(sealed, 4096)
    fcntl.fcntl(sealed, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    _send_raw(fetcher, sealed, b"s" * 16, 3)
    for fd in (read, write, unsealed, sealed):
        os.close(fd)
    assert fetcher.take(1, 4096, b"p" * 16) is None
    assert fetcher.take(2, 4096, b"u" * 16) is None
    got = fetcher.take(3, 4096, b"s" * 16)  # a well-formed one is taken
    assert got is not None and bytes(got[:4]) == bytes(4)
    del got
    assert _open_fds() == before


def test_junk_in_a_mailbox_is_closed_and_bounded(hosts: tuple[SameHost, SameHost]) -> None:
    _, fetcher = hosts
    before = _open_fds()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"not an entry", shared._name(fetcher.mailbox))  # no descriptor
    for k in range(shared._UNMATCHED + 20):
        read, write = os.pipe()
        try:
            _send_raw(fetcher, read, struct.pack("<QQ", k, 0), k)
        except BlockingIOError:  # the mailbox's queue is full: let it be read
            fetcher.take(0, 1, b"")
            _send_raw(fetcher, read, struct.pack("<QQ", k, 0), k)
        os.close(read)
        os.close(write)
    assert fetcher.take(0, 1, b"") is None
    assert len(fetcher._arrived) <= shared._UNMATCHED
    fetcher.close()
    assert _open_fds() < before  # its own socket closed too: nothing kept


def test_memory_files_and_maps_go_with_the_last_holder(
    sharing: None, hosts: tuple[SameHost, SameHost]
) -> None:
    server, fetcher = hosts
    before_fds, before_maps = _open_fds(), _memfd_maps()
    value = encode(np.ones(SHARE_FROM, dtype=np.uint8))
    ticket = server.share(3, value, fetcher.mailbox)
    assert ticket is not None
    out = decode(fetcher.take(3, len(value), ticket) or b"")
    assert _memfd_maps() == before_maps + 2 and _open_fds() == before_fds + 1
    del value  # the server's copy: its descriptor and map (given back off this thread)
    _eventually(lambda: _memfd_maps() == before_maps + 1 and _open_fds() == before_fds)
    assert int(out.sum()) == SHARE_FROM
    del out
    _eventually(lambda: _memfd_maps() == before_maps)


def _eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5.0
    while not check():
        assert time.monotonic() < deadline, "not given back"
        time.sleep(0.01)
