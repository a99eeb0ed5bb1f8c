"""Dista's log lines: a time, who wrote it, then the message, through `logging`.

Every line Dista writes goes through the ``dista`` logger and its children (``dista.head``,
``dista.worker``, ``dista.driver``, ``dista.supervisor`` ...), formatted by `Formatter`:

- ``text`` (the default): ``2026-12-05 03:21:07.123 head WARNING dista head: ...``, the
  local time with milliseconds (as ``date`` shows it), the role, the level, the message;
- ``json`` (``--log-format json``, ``DISTA_LOG_FORMAT=json``), one object a line for log
  shippers: ``time`` (ISO 8601 in UTC, ``Z``, milliseconds), ``level``, ``role``, ``pid``,
  ``logger``, ``message``, and ``exc_info`` (the traceback's text) when there is one.

The role says which process wrote the line: ``head``, ``worker pid 812`` (a worker process),
``supervisor pid 800`` (``dista worker``, which keeps its workers alive), ``driver pid 77``,
``observer``, ``dashboard``.

Who sets it up:

- A process Dista starts (``dista head``, ``dista worker``, ``dista run``) calls `configure`:
  one handler on the ``dista`` logger, which then does not propagate (a task module that
  configures logging in a worker does not double or reformat Dista's lines).
- A driver in an application (``dista.init()``) never touches the root logger. Importing
  `dista_runtime` gives the ``dista`` logger a handler  that writes
  Dista's lines with time and role only while nothing else would: once the application has
  configured logging (the root logger, or one of the ``dista`` loggers, has a handler of its
  own), it steps aside and the records reach the application's handlers alone, once.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import sys
from typing import Final, Literal, TextIO, cast

__all__ = [
    "FORMATS",
    "Formatter",
    "LogFormat",
    "configure",
    "formatted",
    "install_default",
    "log_format",
    "log_level",
    "message_of",
]

LogFormat = Literal["text", "json"]
#: The formats `configure` takes (``--log-format``).
FORMATS: Final[tuple[LogFormat, ...]] = ("text", "json")
FORMAT_ENV: Final = "DISTA_LOG_FORMAT"
LEVEL_ENV: Final = "DISTA_LOG_LEVEL"
_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# A text line's head: its time, its role ("head", "worker pid 812"), its level.
_TIME: Final = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}"
_HEAD: Final = _TIME + r" \S+(?: pid \d+)? (?:" + "|".join(_LEVELS) + ") "
_TEXT: Final = re.compile(_HEAD)
_TEXT_BYTES: Final = re.compile(_HEAD.encode())
_JSON_START: Final = b'{"time": "'


class Formatter(logging.Formatter):
    """A record as one of Dista's lines (`FORMATS`), written by ``role``."""

    def __init__(self, role: str, fmt: LogFormat = "text") -> None:
        super().__init__()
        if fmt not in FORMATS:
            raise ValueError(f"the log format is text or json, not {fmt!r}")
        self.role = role
        self.fmt: LogFormat = fmt

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        trace = ""
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            trace = record.exc_text
        if record.stack_info:
            trace = (trace + "\n" if trace else "") + self.formatStack(record.stack_info)
        when = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        if self.fmt == "json":
            line: dict[str, object] = {
                "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "level": record.levelname,
                "role": self.role,
                "pid": record.process,
                "logger": record.name,
                "message": message,
            }
            if trace:
                line["exc_info"] = trace
            return json.dumps(line, ensure_ascii=False)
        local = when.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        text = f"{local}.{int(record.msecs):03d} {self.role} {record.levelname} {message}"
        return f"{text}\n{trace}" if trace else text


class _Handler(logging.StreamHandler[TextIO]):
    """A stream handler that, given no stream, writes to ``sys.stderr`` as it is when a
    record comes (a test or an application may replace it)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self._given = stream

    def emit(self, record: logging.LogRecord) -> None:
        if self._given is None:
            self.stream = sys.stderr
        super().emit(record)


class _DefaultHandler(_Handler):
    """The ``dista`` logger's handler in an application's process: the role
    ``driver pid N``, the format of ``DISTA_LOG_FORMAT`` (text if unset or wrong), and it
    steps aside for any other handler that will take the record."""

    def __init__(self) -> None:
        super().__init__()
        try:
            fmt = log_format()
        except ValueError:
            fmt = "text"  # importing dista_runtime must not fail for it
        self.setFormatter(Formatter(_driver_role(), fmt))

    def emit(self, record: logging.LogRecord) -> None:
        if _handled_elsewhere(record, self):
            return
        formatter = cast(Formatter, self.formatter)
        formatter.role = _driver_role()  # a forked child has a pid of its own
        super().emit(record)


def _driver_role() -> str:
    return f"driver pid {os.getpid()}"


def _handled_elsewhere(record: logging.LogRecord, ours: logging.Handler) -> bool:
    """Whether a handler other than ``ours`` is on the record's way up to the root."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        if any(h is not ours for h in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False


def _dista() -> logging.Logger:
    return logging.getLogger("dista")


def _remove_ours(logger: logging.Logger) -> None:
    for handler in list(logger.handlers):
        if isinstance(handler, _Handler):
            logger.removeHandler(handler)


def install_default() -> None:
    """Give the ``dista`` logger its `_DefaultHandler`, unless it has one of ours already."""
    logger = _dista()
    if not any(isinstance(h, _Handler) for h in logger.handlers):
        logger.addHandler(_DefaultHandler())


def configure(
    role: str,
    fmt: LogFormat = "text",
    stream: TextIO | None = None,
    level: int | str = logging.INFO,
) -> logging.Handler:
    """Make this process's Dista lines ``fmt`` lines written by ``role``, on ``stream``
    (``sys.stderr`` when None), from ``level`` up; for the processes Dista starts. The
    ``dista`` logger gets this one handler of ours and stops propagating."""
    handler = _Handler(stream)
    handler.setFormatter(Formatter(role, fmt))
    logger = _dista()
    _remove_ours(logger)
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    return handler


def _setting(value: str | None, flag: str, env: str, default: str) -> tuple[str, str]:
    """A flag's value, else the variable's, else ``default``; and which one said it (for
    the error that names it)."""
    if value is not None:
        return value, f"{flag} "
    return os.environ.get(env) or default, f"{env} "


def log_format(value: str | None = None) -> LogFormat:
    """``value`` (a ``--log-format``), else ``DISTA_LOG_FORMAT``, else text; ValueError if
    it is neither text nor json."""
    value, where = _setting(value, "--log-format", FORMAT_ENV, "text")
    name = value.strip().lower()
    for fmt in FORMATS:
        if name == fmt:
            return fmt
    raise ValueError(f"{where}must be text or json, not {value!r}")


def log_level(value: str | None = None) -> str:
    """``value`` (a ``--log-level``), else ``DISTA_LOG_LEVEL``, else INFO: a level name;
    ValueError for another word."""
    value, where = _setting(value, "--log-level", LEVEL_ENV, "INFO")
    name = value.strip().upper()
    if name not in _LEVELS:
        raise ValueError(f"{where}must be one of {', '.join(_LEVELS)}, not {value!r}")
    return name


def formatted(line: bytes) -> bool:
    """Whether ``line`` is one of Dista's lines already (a relay must not prefix it)."""
    return line.startswith(_JSON_START) or _TEXT_BYTES.match(line) is not None


def message_of(line: str) -> str:
    """The message of one of Dista's lines (its text, or its JSON's ``message``); any
    other line as it is."""
    found = _TEXT.match(line)
    if found is not None:
        return line[found.end() :]
    if line.startswith(_JSON_START.decode()):
        try:
            return str(json.loads(line)["message"])
        except (ValueError, KeyError, TypeError):
            return line
    return line
