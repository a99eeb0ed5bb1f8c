"""`dista_runtime.logs`: the text and JSON lines, reading them back, the settings, and the
handler of an application's process that steps aside for the application's own."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator

import pytest

from dista_runtime import logs
from dista_runtime.logs import Formatter, configure, formatted, log_format, log_level, message_of


def record(message: str = "lost worker %s", *args: object, **kw: object) -> logging.LogRecord:
    made = logging.LogRecord("dista.head", logging.WARNING, __file__, 1, message, args, None)
    made.created = 1764904867.123  # 2025-12-05 03:21:07.123 UTC
    made.msecs = 123.0
    made.process = 812
    for name, value in kw.items():
        setattr(made, name, value)
    return made


def test_a_text_line_has_the_local_time_with_ms_the_role_and_the_level() -> None:
    line = Formatter("worker pid 812").format(record("lost worker %s", "127.0.0.1:4100"))
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.123 worker pid 812 WARNING lost worker 127\.0\.0\.1:4100",
        line,
    ), line
    assert formatted(line.encode()) and message_of(line) == "lost worker 127.0.0.1:4100"


def test_a_json_line_has_every_field() -> None:
    line = Formatter("head", "json").format(record("lost worker %s", "127.0.0.1:4100"))
    assert "\n" not in line and formatted(line.encode())
    assert json.loads(line) == {
        "time": "2025-12-05T03:21:07.123Z",
        "level": "WARNING",
        "role": "head",
        "pid": 812,
        "logger": "dista.head",
        "message": "lost worker 127.0.0.1:4100",
    }
    assert message_of(line) == "lost worker 127.0.0.1:4100"


def test_a_traceback_follows_the_text_and_is_a_json_field() -> None:
    try:
        raise ValueError("bad")
    except ValueError:
        info = sys.exc_info()
    text = Formatter("head").format(record("failed", exc_info=info))
    first, *rest = text.splitlines()
    assert (
        first.endswith(" head WARNING failed") and rest[0] == "Traceback (most recent call last):"
    )
    assert rest[-1] == "ValueError: bad"
    line = Formatter("head", "json").format(record("failed", exc_info=info))
    assert json.loads(line)["exc_info"].endswith("ValueError: bad")
    assert "exc_info" not in json.loads(Formatter("head", "json").format(record("fine")))


def test_other_lines_are_not_ours() -> None:
    for line in ["hello", "(pid=4) 2025-12-05 03:21:07.123 head INFO x", '{"a": 1}', ""]:
        assert not formatted(line.encode()), line
        assert message_of(line) == line
    assert message_of('{"time": "broken') == '{"time": "broken'


def test_settings_come_from_the_flag_then_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTA_LOG_FORMAT", raising=False)
    monkeypatch.delenv("DISTA_LOG_LEVEL", raising=False)
    assert (log_format(), log_level()) == ("text", "INFO")
    monkeypatch.setenv("DISTA_LOG_FORMAT", "JSON")
    monkeypatch.setenv("DISTA_LOG_LEVEL", "warning")
    assert (log_format(), log_level()) == ("json", "WARNING")
    assert (log_format("text"), log_level("debug")) == ("text", "DEBUG")
    monkeypatch.setenv("DISTA_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="DISTA_LOG_FORMAT must be text or json, not 'xml'"):
        log_format()
    with pytest.raises(ValueError, match="--log-level must be one of DEBUG, "):
        log_level("loud")
    with pytest.raises(ValueError, match="text or json"):
        Formatter("head", "xml")  # type: ignore[arg-type]


@pytest.fixture
def dista_logger(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """The ``dista`` logger, put back as it was after the test."""
    logger = logging.getLogger("dista")
    monkeypatch.setattr(logger, "handlers", list(logger.handlers))
    monkeypatch.setattr(logger, "propagate", logger.propagate)
    level = logger.level
    yield logger
    logger.setLevel(level)  # which also drops the loggers' cached levels


def test_configure_leaves_one_handler_that_keeps_its_lines(
    dista_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure("head", stream=first)
    configure("supervisor pid 800", "json", stream=second, level="WARNING")
    ours = [h for h in dista_logger.handlers if isinstance(h, logs._Handler)]
    assert len(ours) == 1 and not dista_logger.propagate
    logging.getLogger("dista.supervisor").info("not shown")
    logging.getLogger("dista.supervisor").warning("pid %d died", 4242)
    assert first.getvalue() == ""
    (line,) = second.getvalue().splitlines()
    assert json.loads(line)["role"] == "supervisor pid 800"
    assert json.loads(line)["message"] == "pid 4242 died"
    assert not [r for r in caplog.records if r.name.startswith("dista")]  # not propagated


def test_an_application_without_logging_gets_dista_lines_once(
    dista_logger: logging.Logger,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # no handler: as an application that set none
    dista_logger.handlers = [h for h in dista_logger.handlers if not isinstance(h, logs._Handler)]
    logs.install_default()
    logs.install_default()  # once
    assert sum(isinstance(h, logs._Handler) for h in dista_logger.handlers) == 1
    logging.getLogger("dista.driver").warning("lost the head")
    (line,) = capsys.readouterr().err.splitlines()  # and not logging's last resort too
    assert re.fullmatch(r"\S+ \S+ driver pid \d+ WARNING lost the head", line), line
    # The application configures logging: its handler alone writes Dista's records.
    app = io.StringIO()
    handler = logging.StreamHandler(app)
    handler.setFormatter(logging.Formatter("APP %(name)s %(message)s"))
    monkeypatch.setattr(root, "handlers", [handler])
    logging.getLogger("dista.driver").warning("lost it again")
    assert capsys.readouterr().err == ""
    assert app.getvalue() == "APP dista.driver lost it again\n"
    # A handler on a dista logger counts as the application's too.
    monkeypatch.setattr(root, "handlers", [])
    mine = logging.getLogger("dista.driver")
    monkeypatch.setattr(mine, "handlers", [handler])
    mine.warning("and again")
    assert capsys.readouterr().err == ""
    assert app.getvalue().endswith("APP dista.driver and again\n")
