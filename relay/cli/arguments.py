"""An argparse parser whose errors never quote a value: a mistyped option's value is as likely
as not a key (``unrecognized arguments: --tokens <key>``, ``invalid choice: '<key>'``), so
its errors name options only, each value shown as ``…``. With ``json_errors`` the error is
one JSON log line (``LOG_FORMAT=json``: every line the process writes is JSON)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator, Sequence
from typing import NoReturn

from relay import logs

EXIT_USAGE = 2


class RedactingParser(argparse.ArgumentParser):
    _given: Sequence[str] = ()
    json_errors = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._given, namespace)

    def error(self, message: str) -> NoReturn:
        given = self._given or sys.argv[1:]  # a subparser not called through parse_known_args
        for value in sorted(set(_values(given)), key=len, reverse=True):
            for shown in {value, repr(value)[1:-1]}:
                message = re.sub(rf"(?<!\w){re.escape(shown)}(?!\w)", "…", message)
        if self.json_errors:
            logs.error_line(f"{self.prog}: error: {message}", logs.LogFormat.JSON)
            sys.exit(EXIT_USAGE)
        super().error(message)


_OPTION = re.compile(r"--?[A-Za-z][A-Za-z0-9-]*")


def _values(given: Sequence[str]) -> Iterator[str]:
    """What in ``given`` may be a secret: every argument but an option's name."""
    for argument in given:
        name, equals, value = argument.partition("=")
        if _OPTION.fullmatch(name) is None:
            yield argument
        elif equals and value:
            yield value
