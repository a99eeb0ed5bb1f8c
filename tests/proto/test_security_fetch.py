"""Fetch grants, at the worker's object server (docs/protocol.md, "Extensions: fetch grants").

A worker core whose head link the test drives with raw frames, and raw fetchers on its
object server: what each fetcher gets back, byte for byte, and when.
"""

from __future__ import annotations

import pytest

import dista_proto as dp
from dista_proto import frame as F
from dista_proto._grants import (
    FETCH_GRANT_WAIT_NS,
    FETCH_IDLE_NS,
    MAX_HOSTS,
    MAX_WAITING_PER_LINK,
)
from tests.proto.support.security_peers import split_frames

HEAD_HOST = "10.0.0.1"
OWN = dp.Address("10.0.0.5", 7000)
OID = 0x1234 << dp.ID_BITS | 1
VALUE = bytes(range(256)) * 2
SECOND = FETCH_GRANT_WAIT_NS // 5  # one second


def frames(data: bytes) -> list[dp.Event]:
    """What an object server wrote, as events."""
    return split_frames(data, from_head=False)


class Server:
    """A `Worker` (fetches checked, no heartbeat) and what it wrote to each link."""

    def __init__(self, head_host: str = HEAD_HOST, **options: int | bool) -> None:
        options.setdefault("check_fetches", True)
        self.core = dp.Worker(
            registry_hash=7,
            address=OWN,
            inline_threshold=64,
            heartbeat_ns=0,
            **options,  # type: ignore[arg-type]
        )
        self.core.start(0)
        self.core.peer(dp.HEAD_LINK, head_host)
        self.written: dict[int, bytes] = {}
        self.closed: dict[int, str] = {}
        self.pump()
        self.written.clear()

    def pump(self) -> None:
        for d in self.core.decisions():
            if isinstance(d, dp.Write):
                data = b"".join(bytes(b) for b in d.buffers)
                self.written[d.link] = self.written.get(d.link, b"") + data
            elif isinstance(d, dp.Close):
                self.closed[d.link] = d.reason

    def from_head(self, *events: dp.Event, now: int = 0) -> None:
        data = b"".join(dp.encode_event(e, from_head=True) for e in events)
        self.core.receive_data(dp.HEAD_LINK, data, now)
        self.pump()

    def store(self, oid: int = OID, value: bytes = VALUE) -> None:
        """Run a task whose result stays here (the head hears stored)."""
        self.from_head(dp.Task(oid, 7, b"argument"))
        self.core.task_done(oid, [value], 0, 0)
        self.pump()
        assert dp.Stored(oid, len(value)) in frames(self.written.pop(dp.HEAD_LINK))

    def grant(self, host: str, oid: int = OID, now: int = 0, token: bytes = b"") -> None:
        self.from_head(dp.Located(oid, dp.Address(host, 0), token), now=now)

    def fetcher(self, host: str | None, now: int = 0) -> int:
        link = self.core.connection_made(now)
        if host is not None:
            self.core.peer(link, host)
        return link

    def fetch(
        self, link: int, oid: int = OID, now: int = 0, part: int = 0, token: bytes = b""
    ) -> None:
        self.core.receive_data(link, dp.encode_event(dp.Fetch(oid, part, token)), now)
        self.pump()

    def tick(self, now: int) -> None:
        self.core.on_timer(now)
        self.pump()

    def got(self, link: int) -> bytes:
        return self.written.pop(link, b"")


def refusal(host: str, waited: bool = True) -> str:
    within = f" within {FETCH_GRANT_WAIT_NS / 1e9:g} s" if waited else ""
    return f"object {OID:#x} was not offered to {host} by the head{within}: "


def the_error(data: bytes) -> dp.Error:
    (event,) = frames(data)
    assert isinstance(event, dp.Error), event
    return event


def test_a_granted_fetch_gets_the_result_frame() -> None:
    s = Server()
    s.store()
    s.grant("10.0.0.7")
    link = s.fetcher("10.0.0.7")
    s.fetch(link)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))


def test_a_granted_fetch_in_parts_gets_part_frames() -> None:
    s = Server(min_part=100)
    s.store()
    s.grant("10.0.0.7")
    link = s.fetcher("10.0.0.7")
    s.fetch(link, part=128)
    step = F.part_payload_size(128)
    parts = frames(s.got(link))
    assert parts == [
        dp.Part(OID, len(VALUE), offset, VALUE[offset : offset + step])
        for offset in range(0, len(VALUE), step)
    ]


def test_an_ungranted_fetch_waits_then_gets_an_error_naming_the_object() -> None:
    s = Server()
    s.store()
    link = s.fetcher("10.0.0.8")
    s.fetch(link, now=SECOND)
    assert s.got(link) == b""
    assert s.core.next_deadline() == SECOND + FETCH_GRANT_WAIT_NS
    s.tick(SECOND + FETCH_GRANT_WAIT_NS - 1)
    assert s.got(link) == b""  # not before the wait is over
    s.tick(SECOND + FETCH_GRANT_WAIT_NS)
    error = the_error(s.got(link))
    assert error.object_id == OID
    assert error.message.startswith(refusal("10.0.0.8"))
    assert "a worker or admin certificate over TLS" in error.message
    # The link stays usable: once the head grants the object, the same link gets it.
    assert link not in s.closed and s.core.next_deadline() is None
    s.grant("10.0.0.8", now=7 * SECOND)
    s.fetch(link, now=7 * SECOND)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))


def test_a_grant_arriving_during_the_wait_lets_the_waiting_fetch_in() -> None:
    s = Server()
    s.store()
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    s.grant("10.0.0.9", now=SECOND)  # another host's grant lets nobody else in
    assert s.got(link) == b""
    s.grant("10.0.0.8", now=2 * SECOND)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))
    assert s.core.next_deadline() is None
    s.tick(FETCH_GRANT_WAIT_NS)
    assert s.got(link) == b""  # answered once


def test_a_grant_lets_in_only_that_objects_fetches() -> None:
    s = Server()
    s.store()
    other = OID + 1
    s.store(other, b"other" * 100)
    link = s.fetcher("10.0.0.8")
    s.fetch(link, other)
    s.grant("10.0.0.8")  # for OID, not for the other
    assert s.got(link) == b""
    s.tick(FETCH_GRANT_WAIT_NS)
    assert the_error(s.got(link)).object_id == other


def test_a_fetcher_whose_host_is_unknown_is_refused_after_the_wait() -> None:
    s = Server()
    s.store()
    s.grant("10.0.0.8")
    link = s.fetcher(None)  # the binding never said where it comes from
    s.fetch(link)
    s.tick(FETCH_GRANT_WAIT_NS)
    assert "not offered to this peer (host unknown)" in the_error(s.got(link)).message


@pytest.mark.parametrize("role", ["worker", "admin"])
def test_a_tls_member_fetches_anything_without_a_grant(role: str) -> None:
    s = Server()
    s.store()
    link = s.fetcher("10.0.0.44")
    assert s.core.authenticated(link, frozenset({role}))
    s.fetch(link)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))


def test_a_driver_certificate_needs_its_own_token_granted() -> None:
    s = Server()
    s.store()
    link = s.fetcher("10.0.0.8")
    assert s.core.authenticated(link, frozenset({"driver"}))
    s.fetch(link)
    s.grant("10.0.0.8")  # a host grant: another driver on that host has no token
    assert s.got(link) == b""
    s.tick(FETCH_GRANT_WAIT_NS)
    assert the_error(s.got(link)).message.startswith(refusal("10.0.0.8"))
    token = dp.fetch_token(b"s" * dp.SECRET_SIZE)
    s.fetch(link, token=token, now=FETCH_GRANT_WAIT_NS)
    assert s.got(link) == b""
    s.grant("10.0.0.8", token=token)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))


@pytest.mark.parametrize("roles", [set(), {"observer"}, {"head"}, {"stop"}, {"observer", "stop"}])
def test_other_certificates_may_not_fetch_at_all(roles: set[str]) -> None:
    s = Server()
    link = s.fetcher("10.0.0.8")
    assert not s.core.authenticated(link, frozenset(roles))


def test_authenticated_on_a_link_that_is_not_an_object_server_link_is_false() -> None:
    s = Server()
    assert not s.core.authenticated(dp.HEAD_LINK, frozenset({"worker"}))
    assert not s.core.authenticated(999, frozenset({"worker"}))


def test_free_drops_the_objects_grants() -> None:
    s = Server()
    s.store()
    s.grant("10.0.0.8")
    s.from_head(dp.Free(OID))
    s.store()  # the same object again (its task ran again): the old grant is gone
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    assert s.got(link) == b""
    s.tick(FETCH_GRANT_WAIT_NS)
    assert the_error(s.got(link)).message.startswith(refusal("10.0.0.8"))


def test_a_grant_for_an_object_not_here_is_dropped() -> None:
    s = Server()
    s.grant("10.0.0.8")  # before the object exists (or after it went)
    s.store()
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    s.tick(FETCH_GRANT_WAIT_NS)
    assert the_error(s.got(link)).object_id == OID


def test_a_loopback_grant_means_the_heads_machine() -> None:
    s = Server()
    s.store()
    s.grant("127.0.0.1")
    for host in (HEAD_HOST, "127.0.0.1", "::1", "::ffff:10.0.0.1"):
        link = s.fetcher(host)
        s.fetch(link)
        assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE)), host
    # Not this worker's own address: the head runs on another machine.
    link = s.fetcher(OWN.host)
    s.fetch(link)
    s.tick(FETCH_GRANT_WAIT_NS)
    assert the_error(s.got(link)).message.startswith(refusal(OWN.host))


def test_with_the_head_on_this_machine_a_loopback_grant_takes_this_workers_address() -> None:
    s = Server(head_host="127.0.0.1")
    s.store()
    s.grant("127.0.0.1")
    link = s.fetcher(OWN.host)  # a driver on this machine, fetching by our address
    s.fetch(link)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))


def test_a_missing_object_without_a_grant_waits_like_any_other() -> None:
    s = Server()
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    assert s.got(link) == b""  # no hint whether it exists
    s.tick(FETCH_GRANT_WAIT_NS)
    assert the_error(s.got(link)).message.startswith(refusal("10.0.0.8"))


def test_waiting_fetches_are_bounded_per_link() -> None:
    s = Server()
    link = s.fetcher("10.0.0.8")
    for n in range(MAX_WAITING_PER_LINK):
        s.fetch(link, OID + n)
    assert s.got(link) == b""
    s.fetch(link, OID)  # one too many: refused at once
    assert the_error(s.got(link)).message.startswith(refusal("10.0.0.8", waited=False))
    other = s.fetcher("10.0.0.9")
    s.fetch(other)
    assert s.got(other) == b""  # another link still waits


def test_a_lost_link_drops_its_waiting_fetches() -> None:
    s = Server()
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    s.core.connection_lost(link, SECOND)
    assert s.core.next_deadline() is None
    s.store()
    s.grant("10.0.0.8")  # nothing waits any more: nothing is written
    assert s.written == {}


def test_without_checks_every_fetch_is_served() -> None:
    s = Server(check_fetches=False)
    s.store()
    link = s.fetcher(None)
    s.fetch(link)
    assert s.got(link) == dp.encode_event(dp.Result(OID, VALUE))


def test_a_wait_of_zero_refuses_at_once() -> None:
    s = Server(fetch_wait_ns=0)
    s.store()
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    assert the_error(s.got(link)).message.startswith(refusal("10.0.0.8", waited=False))


# -- silent links --------------------------------------------------------------------------


def test_an_object_server_link_that_never_sends_a_frame_is_closed_after_the_idle_time() -> None:
    s = Server()
    quiet = s.fetcher("10.0.0.8", now=SECOND)
    slow = s.fetcher("10.0.0.9", now=SECOND)
    s.core.receive_data(slow, dp.encode_event(dp.Fetch(OID))[:5], SECOND)  # a frame begun
    assert s.core.next_deadline() == SECOND + FETCH_IDLE_NS
    s.tick(SECOND + FETCH_IDLE_NS - 1)
    assert s.closed == {}
    s.tick(SECOND + FETCH_IDLE_NS)
    reason = f"sent no complete frame in {FETCH_IDLE_NS / 1e9:g} s"
    assert s.closed == {quiet: reason, slow: reason}
    assert s.core.next_deadline() is None


def test_a_link_that_sent_a_frame_is_not_closed_for_idling() -> None:
    s = Server()
    s.store()
    s.grant("10.0.0.8")
    link = s.fetcher("10.0.0.8")
    s.fetch(link)
    assert s.got(link)
    assert s.core.next_deadline() is None
    s.tick(10 * FETCH_IDLE_NS)
    assert s.closed == {}


def test_idle_closing_can_be_turned_off() -> None:
    s = Server(fetch_idle_ns=0)
    s.fetcher("10.0.0.8")
    assert s.core.next_deadline() is None
    s.tick(10 * FETCH_IDLE_NS)
    assert s.closed == {}


def test_negative_times_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        dp.Worker(registry_hash=7, address=OWN, fetch_wait_ns=-1)


def test_a_fetcher_counts_as_greeted_once_it_sent_a_whole_frame() -> None:
    s = Server()
    link = s.fetcher("10.0.0.8")
    assert not s.core.greeted(link)
    fetch = dp.encode_event(dp.Fetch(OID))
    s.core.receive_data(link, fetch[:5], 0)
    assert not s.core.greeted(link)
    s.core.receive_data(link, fetch[5:], 0)
    assert s.core.greeted(link)
    s.core.connection_lost(link, 0)
    assert s.core.greeted(link)  # gone: never the one to evict
    assert s.core.greeted(dp.HEAD_LINK)


def test_an_object_keeps_its_newest_grants_when_too_many_hosts_have_one() -> None:
    s = Server()
    s.store()
    hosts = [f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}" for n in range(MAX_HOSTS + 2)]
    for host in hosts[: MAX_HOSTS + 1]:
        s.grant(host)  # the last one pushes hosts[0] out
    s.grant(hosts[1])  # granted again: the newest now
    s.grant(hosts[-1])  # pushes out the oldest: hosts[2]
    for host, served in ((hosts[0], False), (hosts[1], True), (hosts[2], False), (hosts[3], True)):
        link = s.fetcher(host)
        s.fetch(link)
        assert (s.got(link) == dp.encode_event(dp.Result(OID, VALUE))) is served, host
