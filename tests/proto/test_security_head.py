"""The head's security rules, over the core in memory (docs/protocol.md "Security rules")."""

from __future__ import annotations

from .security_peers import Net


def test_a_link_is_greeted_once_it_said_hello_and_a_gone_one_counts_as_greeted() -> None:
    net = Net()
    quiet = net.connect()
    assert not net.head.greeted(quiet.link)
    d = net.driver()
    assert net.head.greeted(d.link)
    net.head.connection_lost(quiet.link, 0, "gone")
    assert net.head.greeted(quiet.link)
    assert net.head.greeted(12345)
