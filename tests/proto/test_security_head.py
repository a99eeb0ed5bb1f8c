"""The head's security rules, over the core in memory (docs/protocol.md "Security rules")."""

from __future__ import annotations

import pytest

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import REGISTRY, Net, Raw


def test_a_link_is_greeted_once_it_said_hello_and_a_gone_one_counts_as_greeted() -> None:
    net = Net()
    quiet = net.connect()
    assert not net.head.greeted(quiet.link)
    d = net.driver()
    assert net.head.greeted(d.link)
    net.head.connection_lost(quiet.link, 0, "gone")
    assert net.head.greeted(quiet.link)
    assert net.head.greeted(12345)


def _authenticated(net: Net, *roles: str) -> Raw:
    peer = net.connect()
    assert net.head.authenticated(peer.link, frozenset(roles))
    return peer


WORKER_HELLO = dp.Hello(F.ROLE_WORKER, REGISTRY, dp.Address("10.0.0.2", 7001))


@pytest.mark.parametrize(
    ("roles", "hello", "said"),
    [
        (("driver",), WORKER_HELLO, "grants driver; it may not say hello as a worker"),
        (
            ("worker",),
            dp.Hello(F.ROLE_DRIVER, REGISTRY),
            "grants worker; it may not say hello as a driver",
        ),
        (
            ("observer",),
            dp.Hello(F.ROLE_CLIENT, REGISTRY),
            "grants observer; it may not say hello as a client",
        ),
        (  # a client may call any actor: it runs in a worker, with its certificate
            ("driver",),
            dp.Hello(F.ROLE_CLIENT, REGISTRY),
            "grants driver; it may not say hello as a client",
        ),
        (
            ("stop", "worker"),
            dp.Hello(F.ROLE_OBSERVER),
            "grants stop, worker; it may not say hello as an observer",
        ),
    ],
)
def test_a_hello_the_certificate_does_not_grant_is_refused_and_closed(
    roles: tuple[str, ...], hello: dp.Hello, said: str
) -> None:
    net = Net()
    peer = _authenticated(net, *roles)
    peer.send(hello)
    assert peer.take() == [dp.Error(0, f"this connection's certificate {said}")]
    assert peer.closed == f"this connection's certificate {said}"
    assert net.head.stats().workers == 0
    assert net.head.greeted(peer.link)  # gone
    peer.send(hello)  # whatever it still sends is dropped
    assert peer.take() == []


@pytest.mark.parametrize(
    ("roles", "hello"),
    [
        (("worker",), WORKER_HELLO),
        (("admin",), WORKER_HELLO),
        (("driver",), dp.Hello(F.ROLE_DRIVER, REGISTRY)),
        (("worker",), dp.Hello(F.ROLE_CLIENT, REGISTRY)),
        (("driver",), dp.Hello(F.ROLE_OBSERVER)),
        (("observer",), dp.Hello(F.ROLE_OBSERVER)),
        (("admin",), dp.Hello(F.ROLE_DRIVER, REGISTRY)),
    ],
)
def test_a_hello_the_certificate_grants_is_taken(roles: tuple[str, ...], hello: dp.Hello) -> None:
    net = Net()
    peer = _authenticated(net, *roles)
    peer.send(hello)
    assert peer.closed is None
    assert all(not isinstance(e, dp.Error) for e in peer.take())
    assert net.head.greeted(peer.link)


@pytest.mark.parametrize("roles", [(), ("head",), ("stop",), ("head", "stop", "other")])
def test_roles_that_may_do_nothing_at_a_head_are_refused_before_any_byte(
    roles: tuple[str, ...],
) -> None:
    net = Net()
    peer = net.connect()
    assert not net.head.authenticated(peer.link, frozenset(roles))
    assert net.head.decisions() == []  # the binding closes it; the head queued nothing
    peer.send(dp.Hello(F.ROLE_DRIVER, REGISTRY))
    assert peer.take() == [] and peer.closed is None
    assert net.head.drivers == 0
    assert net.head.next_deadline() is None  # nor does it wait for its hello


def test_stop_needs_the_stop_or_admin_role() -> None:
    net = Net()
    w = net.worker()
    looker = _authenticated(net, "observer")
    looker.send(dp.Hello(F.ROLE_OBSERVER), dp.Stop())
    said = (
        "this connection's certificate grants observer; it may not stop the head "
        "(stop needs a certificate with the stop or admin role)"
    )
    assert looker.take() == [dp.Error(0, said)]
    assert looker.closed == said
    assert not net.head.stopping and w.closed is None
    for roles in (("observer", "stop"), ("admin",)):
        net = Net()
        w = net.worker()
        stopper = _authenticated(net, *roles)
        stopper.send(dp.Hello(F.ROLE_OBSERVER), dp.Stop())
        assert net.head.stopping
        assert w.take() == [dp.Stop()]


def test_a_plain_link_is_unrestricted_as_before() -> None:
    net = Net()
    w = net.worker()
    observer = net.connect()
    observer.send(dp.Hello(F.ROLE_OBSERVER), dp.Stop())
    assert net.head.stopping
    assert w.take() == [dp.Stop()]


S = 1_000_000_000


def test_a_link_without_hello_is_closed_at_the_deadline_even_if_it_dribbles() -> None:
    net = Net(hello_deadline_ns=10 * S, hello_idle_ns=5 * S)
    slow = net.connect(now=0)
    hello = dp.encode_event(dp.Hello(F.ROLE_DRIVER, REGISTRY))
    for t in range(1, 10):  # a byte every second: never idle for 5 s
        net.head.receive_data(slow.link, hello[t - 1 : t], t * S)
        assert net.head.next_deadline() == min(10, t + 5) * S
        net.head.on_timer(t * S)
        net.pump()
        assert slow.closed is None
    net.head.on_timer(10 * S)
    net.pump()
    assert slow.closed == "no hello within 10 s"
    assert slow.take() == []  # no error frame: it is simply closed
    assert net.head.next_deadline() is None


def test_a_silent_link_without_hello_is_closed_after_the_idle_time() -> None:
    net = Net(hello_deadline_ns=10 * S, hello_idle_ns=5 * S)
    quiet = net.connect(now=0)
    later = net.connect(now=2 * S)
    net.head.receive_data(quiet.link, b"\x01", 4 * S)
    assert net.head.next_deadline() == 7 * S  # later's idle time
    net.head.on_timer(7 * S)
    net.pump()
    assert later.closed == "no hello, and nothing read for 5 s"
    assert quiet.closed is None
    assert net.head.next_deadline() == 9 * S
    net.head.on_timer(9 * S)
    net.pump()
    assert quiet.closed == "no hello, and nothing read for 5 s"
    assert net.head.greeted(quiet.link) and net.head.greeted(later.link)


def test_a_greeted_link_is_never_closed_by_the_watch_and_zero_turns_it_off() -> None:
    # The hello watch alone (the idle watch past hello, off here, is tested in
    # tests/proto/test_peer_watch.py).
    net = Net(hello_deadline_ns=10 * S, hello_idle_ns=5 * S, idle_ns=0)
    d = net.driver()
    assert net.head.next_deadline() is None
    net.head.on_timer(60 * S)
    net.pump()
    assert d.closed is None
    off = Net(hello_deadline_ns=0, hello_idle_ns=0)
    quiet = off.connect()
    assert off.head.next_deadline() is None
    off.head.on_timer(3600 * S)
    off.pump()
    assert quiet.closed is None and not off.head.greeted(quiet.link)
    with pytest.raises(ValueError, match="hello_deadline_ns"):
        dp.Head(epoch=1, first_number=1, hello_deadline_ns=-1)


def test_many_silent_links_cost_one_timer_each() -> None:
    net = Net(hello_deadline_ns=10 * S, hello_idle_ns=0)
    links = [net.connect(now=i) for i in range(1000)]
    net.head.on_timer(10 * S + 499)
    net.pump()
    assert sum(p.closed is not None for p in links) == 500
    assert net.head.next_deadline() == 10 * S + 500
