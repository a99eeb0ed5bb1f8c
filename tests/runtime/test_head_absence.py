"""Which dial failures mean "no head there yet" (a worker waits for those), the backoff
between tries, and what `Patience` says and when (`dista_runtime._hosts.wait`)."""

from __future__ import annotations

import logging

import pytest

from dista_runtime._hosts import wait
from dista_runtime._hosts.wait import Patience, absence, backoff


@pytest.mark.parametrize(
    ("error", "said"),
    [
        ("[Errno 111] Connect call failed ('127.0.0.1', 9)", "connection refused"),  # asyncio
        ("[Errno 111] Connection refused (127.0.0.1:9)", "connection refused"),  # anyio
        ("[Errno 111] Connection refused", "connection refused"),  # gevent
        (
            (
                "Multiple exceptions: [Errno 99] Cannot assign requested address, "
                "[Errno 111] Connect call failed ('127.0.0.1', 9)"
            ),
            "connection refused",
        ),
        ("[Errno 2] No such file or directory", "no socket there"),  # unix:PATH not made yet
        ("[Errno 104] Connection reset by peer", "connection reset"),
        ("[Errno 113] No route to host", "host unreachable"),
        ("[Errno 101] Network is unreachable", "network unreachable"),
        ("[Errno -2] Name or service not known", "name does not resolve"),
        ("[Errno -3] Temporary failure in name resolution", "name does not resolve yet"),
        ("TimeoutError", "timed out"),
        ("timed out", "timed out"),
        ("no address for head.example", "name has no address"),
    ],
)
def test_a_head_not_there_yet(error: str, said: str) -> None:
    assert absence(error) == said


@pytest.mark.parametrize(
    "error",
    [
        "",
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate",
        "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1000)",
        "SSL handshake is taking longer than 60.0 seconds: aborting the connection",
        "[Errno 13] Permission denied",
        "[Errno 99] Cannot assign requested address",
        "port must be 0-65535.",
        "OverflowError",
    ],
)
def test_other_failures_are_not_waited_for(error: str) -> None:
    assert absence(error) == ""


def test_backoff_doubles_to_its_cap_within_its_jitter() -> None:
    assert [backoff(n, 0.1, 0.5) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert backoff(10**6, 0.1, 2.0) == 2.0  # a day of tries: no overflow
    for n in range(1, 12):
        plain = backoff(n, 0.1, 2.0)
        assert 0.8 * plain <= backoff(n, 0.1, 2.0, 0.2) <= 1.2 * plain


def test_patience_says_it_waits_once_then_seldom(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    monkeypatch.setattr(wait.time, "monotonic", lambda: clock[0])
    patience = Patience("10.0.0.5:7420", 30.0)
    refused = "[Errno 111] Connection refused"
    with caplog.at_level(logging.WARNING, "dista.worker"):
        waits = []
        for _ in range(8):  # 8 tries in about 5 s: one line
            delay = patience.next(refused)
            assert delay is not None
            waits.append(delay)
            clock[0] += delay
        assert len(caplog.records) == 1
        assert (
            "no head at 10.0.0.5:7420 yet (connection refused); trying again for up to 30 s"
            in (caplog.records[0].getMessage())
        )
        assert waits[0] < 0.15 and max(waits) <= 2.4  # 0.1 s first, 2 s at most (± 20 %)
        assert patience.next("[Errno -3] Temporary failure in name resolution") is not None
        assert len(caplog.records) == 2  # a new reason is news
        assert "still no head" in caplog.records[1].getMessage()
        clock[0] += 10.0
        assert patience.next(refused) is not None
        assert len(caplog.records) == 3  # and ~10 s more of it
        clock[0] += 30.0  # the time is up
        assert patience.next(refused) is None
        patience.reached()  # (not what happens after giving up: what it would say)
    gave_up = patience.gave_up()
    assert gave_up.startswith("no head at 10.0.0.5:7420 after trying for ")
    assert "(--wait-for-head or DISTA_WAIT_FOR_HEAD: 30 s; 11 tries; last: [Errno 111]" in gave_up
    assert "reached the head at 10.0.0.5:7420 after" in caplog.records[-1].getMessage()


def test_the_setting_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTA_WAIT_FOR_HEAD", raising=False)
    assert wait.wait_for_head_s() == 60.0
    monkeypatch.setenv("DISTA_WAIT_FOR_HEAD", "2.5")
    assert wait.wait_for_head_s() == 2.5
    monkeypatch.setenv("DISTA_WAIT_FOR_HEAD", "soon")
    with pytest.raises(ValueError, match="DISTA_WAIT_FOR_HEAD must be a number of seconds"):
        wait.wait_for_head_s()
