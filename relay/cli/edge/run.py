"""``relay [OPTIONS] edge|offline|health|ready ...``: Edge's command line run, the service
(``relay.process.server``) or a check (``relay.cli.edge.checks``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from relay import logs
from relay.cli.edge import checks
from relay.cli.edge.command_line import Check, asked_log_format, parse
from relay.cli.starting import EXIT_CONFIG, start
from relay.process.server import serve
from relay.settings import Settings, SettingsError, load_settings

log = logging.getLogger("relay")

PORT_OPTIONS = "-p N (--port N) before the subcommand, or PORT=N (RELAY_PORT, if set, wins)"


def main(argv: Sequence[str]) -> int:
    asked = asked_log_format(argv, os.environ)
    try:
        parsed = parse(argv, os.environ)
    except SettingsError as exc:
        logs.error_line(f"relay: error: {exc}", asked)
        return EXIT_CONFIG
    if isinstance(parsed, Check):
        why = checks.run(parsed)
        if why is not None:
            logs.error_line(f"relay: unhealthy: {why}", asked)
        return 0 if why is None else 1
    config = os.environ.get("RELAY_CONFIG")

    def run(settings: Settings) -> int:
        logs.configure(settings.log_level, settings.log_format)
        for option in parsed.no_effect:
            log.warning("Edge's option has no effect on relay", extra={"option": option})
        return serve(settings, asked is logs.LogFormat.JSON, PORT_OPTIONS)

    return start(
        lambda: load_settings(parsed.overrides, Path(config) if config else None), run, asked
    )
