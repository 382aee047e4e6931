"""Structured logs: one JSON object a line on stderr (or plain text for a terminal).

Fields passed with ``extra=`` become top-level keys. Key material is never passed to a log
call: code logs ``Principal.display`` or ``auth.redact(key)``, never a key. Two policies make
that hold for what libraries log too, whatever the level: loggers that write what callers
sent (SQL parameters) are held at INFO, and every line is redacted of
anything shaped like an Unleash key or an ``Authorization`` value.
"""

from __future__ import annotations

import enum
import json
import logging
import re
import sys
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

# Standard library only: the supervisor of several workers imports this and stays small.


class LogFormat(enum.StrEnum):
    JSON = "json"
    TEXT = "text"


_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

# Its DEBUG records carry what callers sent: every statement with its parameters (key and
# session hashes, CSRF tokens). aiohttp's server logger is made safe where it is configured
# (relay.api.application: a malformed request is logged by its kind, never its bytes).
_HELD_AT_INFO = ("aiosqlite",)

# project:environment.secret (relay.core.keys) not inside a longer word (a time's 12:30:45.123
# is not a key), and an Authorization value. A secret ends at a quote or backslash, so the
# redacted JSON line stays JSON.
_KEY_SHAPED = re.compile(
    r"(?<![\w.:~*\]-])((?:\*|\[\]|[A-Za-z0-9_.~-]+):(?:\*|[A-Za-z0-9_.~-]+?))\.[^\s\"'\\]{8,}"
)
_AUTHORIZATION = re.compile(
    r"(?i)(authorization[\\\"']{0,2}\s*[:=]\s*[\\\"']{0,2})(?:bearer\s+)?[^\s\"'\\]+"
)


def redact(line: str) -> str:
    """``line`` with any key's secret and any Authorization value replaced by ``****``."""
    return _AUTHORIZATION.sub(r"\1****", _KEY_SHAPED.sub(r"\1.****", line))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(self._line(record))

    def _line(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(self._line(record))

    def _line(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD)
        line = f"{record.levelname:<7} {record.name}: {record.getMessage()}"
        line = f"{line} {extra}" if extra else line
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str, fmt: LogFormat, **fields: object) -> None:
    """``fields`` are added to every record (a worker's number, with several workers)."""
    handler = logging.StreamHandler(sys.stderr)
    formatter: logging.Formatter
    match fmt:
        case LogFormat.JSON:
            formatter = JsonFormatter()
        case LogFormat.TEXT:
            formatter = TextFormatter()
    handler.setFormatter(formatter)
    if fields:
        handler.addFilter(_Fields(fields))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _HELD_AT_INFO:
        logging.getLogger(name).setLevel(max(root.level, logging.INFO))
    # aiohttp's access log would add a line per request; relay.access and metrics cover it
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # Python's warnings and an uncaught exception's traceback are log records too, so that
    # with JSON logs every line written is JSON
    logging.captureWarnings(True)
    sys.excepthook = _uncaught


def _uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logging.getLogger("relay").critical("uncaught exception", exc_info=(kind, exc, tb))


class _Fields(logging.Filter):
    def __init__(self, fields: dict[str, object]) -> None:
        super().__init__()
        self._fields = fields

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in self._fields.items():
            setattr(record, name, value)
        return True


def error_line(message: str, fmt: LogFormat | None) -> None:
    """An error said before (or without) the logs being configured: one line on stderr, a JSON
    log line when JSON was asked for, else ``message`` as it is (a person reads it)."""
    line = redact(message)
    if fmt is LogFormat.JSON:
        record = logging.makeLogRecord(
            {"name": "relay", "levelno": logging.ERROR, "levelname": "ERROR", "msg": message}
        )
        line = JsonFormatter().format(record)
    print(line, file=sys.stderr, flush=True)
