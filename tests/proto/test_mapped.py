"""Objects mapped on one host, at the cores (docs/protocol.md, "Extensions: objects mapped
on one host"): what an object server answers a fetch naming a mailbox, and what a fetcher
does with a mapped frame, byte for byte; the memory files themselves are the runtime's
(tests/runtime/test_shared.py)."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F
from dista_proto._fetcher import Fetcher
from dista_proto._links import Links
from dista_proto.frame import Bytes
from tests.proto.support.security_peers import split_frames

OWN = dp.Address("10.0.0.5", 7000)
OID = 0x1234 << dp.ID_BITS | 1
VALUE = bytes(range(256)) * 8
MAILBOX = 0x0123456789ABCDEF
TICKET = bytes(range(16))


class FakeHost:
    """A `dp.Mapping` that records what it was asked, and shares or takes as told."""

    def __init__(self, mailbox: int = MAILBOX, ticket: bytes | None = TICKET) -> None:
        self._mailbox = mailbox
        self.ticket = ticket
        self.shared: list[tuple[int, bytes, int]] = []
        self.kept: dict[bytes, Bytes] = {}
        self.taken: list[tuple[int, int, bytes]] = []

    @property
    def mailbox(self) -> int:
        return self._mailbox

    def share(self, object_id: int, value: Bytes, mailbox: int) -> bytes | None:
        self.shared.append((object_id, bytes(value), mailbox))
        return self.ticket

    def take(self, object_id: int, size: int, ticket: bytes) -> Bytes | None:
        self.taken.append((object_id, size, ticket))
        return self.kept.pop(ticket, None)


def frames(data: bytes) -> list[dp.Event]:
    """What an object server wrote, as events."""
    return split_frames(data, from_head=False)


def serve(fetch: dp.Fetch, mapping: FakeHost | None) -> list[dp.Event]:
    """What a worker storing `VALUE` as ``OID`` writes back for ``fetch``."""
    core = dp.Worker(
        registry_hash=7,
        address=OWN,
        inline_threshold=64,
        heartbeat_ns=0,
        min_part=1024,
        mapping=mapping,
    )
    core.start(0)
    core.decisions()
    core.receive_data(dp.HEAD_LINK, dp.encode_event(dp.Task(OID, 7, b"a"), from_head=True), 0)
    core.task_done(OID, [VALUE], 0, 0)
    core.decisions()
    link = core.connection_made(0)
    core.receive_data(link, dp.encode_event(fetch), 0)
    out = b""
    for d in core.decisions():
        if isinstance(d, dp.Write) and d.link == link:
            out += b"".join(bytes(b) for b in d.buffers)
    return frames(out)


def test_a_fetch_naming_a_mailbox_gets_one_mapped_frame_when_the_runtime_shares() -> None:
    host = FakeHost()
    assert serve(dp.Fetch(OID, 1024, mailbox=MAILBOX), host) == [
        dp.Mapped(OID, len(VALUE), TICKET)
    ]
    assert host.shared == [(OID, VALUE, MAILBOX)]


def test_a_value_the_runtime_cannot_share_goes_as_the_page_has_it() -> None:
    host = FakeHost(ticket=None)
    got = serve(dp.Fetch(OID, 1024, mailbox=MAILBOX), host)
    step = F.part_payload_size(1024)
    assert got == [
        dp.Part(OID, len(VALUE), offset, VALUE[offset : offset + step])
        for offset in range(0, len(VALUE), step)
    ]
    assert len(host.shared) == 1


def test_a_fetch_without_a_mailbox_is_never_shared() -> None:
    host = FakeHost()
    assert serve(dp.Fetch(OID, 0), host) == [dp.Result(OID, VALUE)]
    assert host.shared == []


def test_a_server_without_a_mapping_answers_a_mailbox_fetch_by_the_page() -> None:
    assert serve(dp.Fetch(OID, 0, mailbox=MAILBOX), None) == [dp.Result(OID, VALUE)]


def test_a_missing_object_is_an_error_whatever_the_mailbox() -> None:
    host = FakeHost()
    (error,) = serve(dp.Fetch(OID + 1, 0, mailbox=MAILBOX), host)
    assert isinstance(error, dp.Error) and "is not on this worker" in error.message
    assert host.shared == []


class Fetching:
    """A fetcher with ``host`` asking a server at `OWN` for ``OID``; its link's bytes."""

    def __init__(self, host: FakeHost | None) -> None:
        self.links = Links()
        self.fetcher = Fetcher(self.links, 4096, bytearray, host)
        self.fetcher.request(OID, OWN)
        self.link = next(d.link for d in self.links.decisions() if isinstance(d, dp.Connect))
        self.links.connected(self.link)

    def sent(self) -> list[dp.Event]:
        out = b""
        for d in self.links.decisions():
            if isinstance(d, dp.Write):
                out += b"".join(bytes(b) for b in d.buffers)
        return frames(out)

    def answer(self, *events: dp.Event) -> list[tuple[int, Bytes | None, str]]:
        data = b"".join(dp.encode_event(e) for e in events)
        got, error = self.links.receive(self.link, data)
        assert error is None
        return self.fetcher.receive(self.link, got)


def test_a_fetcher_with_a_mailbox_names_it_in_every_fetch() -> None:
    f = Fetching(FakeHost())
    assert f.sent() == [dp.Fetch(OID, 4096, b"", MAILBOX)]
    assert Fetching(None).sent() == [dp.Fetch(OID, 4096)]


def test_a_mapped_frame_taken_from_the_mailbox_is_the_value() -> None:
    host = FakeHost()
    f = Fetching(host)
    f.sent()
    host.kept[TICKET] = VALUE
    assert f.answer(dp.Mapped(OID, len(VALUE), TICKET)) == [(OID, VALUE, "")]
    assert host.taken == [(OID, len(VALUE), TICKET)]
    assert f.sent() == []


def test_a_mapped_frame_whose_file_never_came_is_fetched_again_without_the_mailbox() -> None:
    host = FakeHost()
    f = Fetching(host)
    f.sent()
    assert f.answer(dp.Mapped(OID, len(VALUE), TICKET)) == []
    assert f.sent() == [dp.Fetch(OID, 4096)]  # no mailbox: the object comes by the page
    assert f.answer(dp.Result(OID, VALUE)) == [(OID, VALUE, "")]


def test_a_mapped_frame_for_an_object_not_asked_for_is_ignored() -> None:
    host = FakeHost()
    f = Fetching(host)
    f.sent()
    host.kept[TICKET] = VALUE
    assert f.answer(dp.Mapped(OID + 1, len(VALUE), TICKET)) == []
    assert host.taken == [] and f.sent() == []


def test_a_fetcher_without_a_mapping_refetches_on_a_mapped_frame() -> None:
    f = Fetching(None)
    f.sent()
    assert f.answer(dp.Mapped(OID, len(VALUE), TICKET)) == []
    assert f.sent() == [dp.Fetch(OID, 4096)]
