"""How a command that runs with settings starts, relay's own (``relay.cli``) and Edge's
(``relay.cli.edge.run``): settings loaded, then the command; an error an operator can fix
(bad settings, a busy port, an unwritable data dir) ends it with one line on stderr, a JSON
log line when JSON logs were asked for."""

from __future__ import annotations

import os
from collections.abc import Callable

from relay import logs
from relay.core.errors import StorageError
from relay.core.keys import InvalidKey
from relay.settings import Settings, SettingsError

EXIT_CONFIG = 2
PRIVATE = 0o077  # the umask of every command that runs with settings: files 0600, dirs 0700


def start(
    load: Callable[[], Settings], run: Callable[[Settings], int], asked: logs.LogFormat | None
) -> int:
    # What the service writes (databases with key and session hashes and CSRF tokens, their
    # WAL and shared memory, which SQLite creates itself, the instance id, the data dir) is
    # its user's alone, whatever umask it was started with; workers inherit it.
    os.umask(PRIVATE)
    try:
        return run(load())
    except (SettingsError, StorageError, InvalidKey, OSError) as exc:
        logs.error_line(f"relay: error: {exc}", asked)
        return EXIT_CONFIG
