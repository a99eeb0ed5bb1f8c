"""`Progress`: silent off a TTY and for short waits, rate-limited, finishes its line."""

from __future__ import annotations

import io

import pytest

from dista_runtime._api.progress import Progress


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_short_wait_prints_nothing(clock: Clock) -> None:
    out = FakeTTY()
    with Progress(10, "get", out, clock=clock) as p:
        clock.now += 0.3
        p.update(5)
        clock.now += 0.1
        p.update(10)
    assert out.getvalue() == ""


def test_not_a_tty_prints_nothing(clock: Clock) -> None:
    out = io.StringIO()
    with Progress(10, "get", out, clock=clock) as p:
        clock.now += 5
        p.update(5)
    assert out.getvalue() == ""


def test_force_draws_on_any_stream(clock: Clock) -> None:
    out = io.StringIO()
    with Progress(10, "get", out, clock=clock, force=True) as p:
        clock.now += 1
        p.update(5)
    assert out.getvalue().startswith("\rget: 5/10 (50%) 5.0/s, 1.0s")


def test_line_format_and_finish(clock: Clock) -> None:
    out = FakeTTY()
    with Progress(200, "get", out, clock=clock) as p:
        clock.now += 2
        p.update(50)
        assert out.getvalue() == "\rget: 50/200 (25%) 25.0/s, 2.0s"
        assert p.shown
        clock.now += 2
        p.update(200)
    assert out.getvalue().endswith("\rget: 200/200 (100%) 50.0/s, 4.0s\n")


def test_rate_limited(clock: Clock) -> None:
    out = FakeTTY()
    p = Progress(1000, "run", out, min_interval=0.1, delay=0.0, clock=clock)
    for i in range(100):  # 100 updates over 0.5 s: at most one per 0.1 s
        clock.now += 0.005
        p.update(i)
    assert out.getvalue().count("\r") == 5
    p.close()


def test_first_draw_after_delay(clock: Clock) -> None:
    out = FakeTTY()
    p = Progress(10, "x", out, delay=0.5, clock=clock)
    clock.now += 0.49
    p.update(1)
    assert out.getvalue() == ""
    clock.now += 0.01
    p.update(2)
    assert out.getvalue() == "\rx: 2/10 (20%) 4.0/s, 0.5s"


def test_shorter_line_blanks_the_rest(clock: Clock) -> None:
    out = FakeTTY()
    p = Progress(10, "x", out, delay=0.0, min_interval=0.0, clock=clock)
    clock.now += 0.1
    p.update(9)  # 90.0/s
    first = out.getvalue()
    clock.now += 10
    p.update(9)  # 0.9/s: shorter
    second = out.getvalue()[len(first) :]
    assert len(second) == len(first)
    assert second.rstrip(" ") == "\rx: 9/10 (90%) 0.9/s, 10.1s"


def test_leave_false_clears(clock: Clock) -> None:
    out = FakeTTY()
    with Progress(4, "x", out, leave=False, clock=clock) as p:
        clock.now += 1
        p.update(2)
    line = "\rx: 2/4 (50%) 2.0/s, 1.0s"
    assert out.getvalue() == line + "\r" + " " * (len(line) - 1) + "\r"


def test_updates_after_close_ignored(clock: Clock) -> None:
    out = FakeTTY()
    p = Progress(4, "x", out, clock=clock)
    clock.now += 1
    p.update(1)
    p.close()
    p.close()
    written = out.getvalue()
    clock.now += 1
    p.update(4)
    assert out.getvalue() == written
    assert written.endswith("\n") and written.count("\n") == 1


def test_zero_total(clock: Clock) -> None:
    p = Progress(0, "x", FakeTTY(), clock=clock)
    assert p.render(clock.now) == "x: 0/0 (100%) 0.0/s, 0.0s"


def test_broken_stream_stops_drawing(clock: Clock) -> None:
    out = FakeTTY()
    p = Progress(4, "x", out, delay=0.0, min_interval=0.0, clock=clock)
    out.close()
    clock.now += 1
    p.update(1)  # ValueError from the closed stream is swallowed
    p.update(2)
    p.close()


def test_defaults_to_stderr(capsys: pytest.CaptureFixture[str], clock: Clock) -> None:
    with Progress(2, "x", clock=clock, force=True) as p:
        clock.now += 1
        p.update(1)
    assert capsys.readouterr().err == "\rx: 1/2 (50%) 1.0/s, 1.0s\rx: 1/2 (50%) 1.0/s, 1.0s\n"


@pytest.mark.parametrize("value", ["0", "off", "false", "No"])
def test_dista_progress_0_turns_it_off(
    clock: Clock, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("DISTA_PROGRESS", value)
    out = FakeTTY()
    with Progress(10, "get", out, clock=clock) as p:
        clock.now += 2.0
        p.update(5)
    assert out.getvalue() == ""
    monkeypatch.setenv("DISTA_PROGRESS", "1")
    with Progress(10, "get", out, clock=clock) as p:
        clock.now += 2.0
        p.update(5)
    assert "get: 5/10" in out.getvalue()
