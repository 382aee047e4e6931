"""``relay proxy``: the service in relay mode with the Unleash Proxy's paths, from the
Proxy's own environment (``relay.cli.proxy.environment``). It takes no option but
``--help``: the Proxy had none."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from relay import logs
from relay.cli.arguments import RedactingParser
from relay.cli.proxy.environment import Serve, read
from relay.cli.proxy.variables import VARIABLES, Kind
from relay.cli.starting import EXIT_CONFIG, start
from relay.process.server import serve
from relay.settings import Settings, SettingsError, load_settings

log = logging.getLogger("relay")

PORT_OPTIONS = "PORT=N (or PROXY_PORT=N; RELAY_PORT, if set, wins)"


def main(argv: Sequence[str]) -> int:
    asked = asked_log_format(os.environ)
    RedactingParser.json_errors = asked is logs.LogFormat.JSON
    _parser().parse_args(argv)  # --help, or an error for anything else
    try:
        parsed = read(os.environ)
    except SettingsError as exc:
        logs.error_line(f"relay: error: {exc}", asked)
        return EXIT_CONFIG
    config = os.environ.get("RELAY_CONFIG")

    def run(settings: Settings) -> int:
        logs.configure(settings.log_level, settings.log_format)
        for line in parsed.said:
            log.warning(line)
        return serve(settings, asked is logs.LogFormat.JSON, PORT_OPTIONS)

    return start(lambda: _load(parsed, Path(config) if config else None), run, asked)


def _load(parsed: Serve, config: Path | None) -> Settings:
    """The settings; an invalid one named as the Proxy's variable that set it."""
    try:
        return load_settings(parsed.overrides, config)
    except SettingsError as exc:
        message = str(exc)
        for setting, variable in parsed.sources.items():
            message = message.replace(f"{setting}:", f"{variable} ({setting}):")
        raise SettingsError(message) from None


def asked_log_format(env: Mapping[str, str]) -> logs.LogFormat | None:
    """The log format of errors found before the settings are: ``RELAY_LOG_FORMAT``, else
    the Proxy's ``JSON_LOGGER`` (any value: JSON)."""
    asked = env.get("RELAY_LOG_FORMAT")
    if asked:
        return logs.LogFormat.JSON if asked.strip().lower() == "json" else logs.LogFormat.TEXT
    return logs.LogFormat.JSON if env.get("JSON_LOGGER") else None


def _parser() -> RedactingParser:
    honoured = ", ".join(v.name for v in VARIABLES if v.kind is not Kind.REFUSED)
    refused = ", ".join(v.name for v in VARIABLES if v.kind is Kind.REFUSED)
    return RedactingParser(
        prog="relay proxy",
        description="The Unleash Proxy's drop-in: relay in relay mode serving the Proxy's paths"
        " ({PROXY_BASE_PATH}/proxy), from the Proxy's environment variables, unchanged."
        " Required: UNLEASH_URL, UNLEASH_API_TOKEN, UNLEASH_PROXY_CLIENT_KEYS."
        f" Read: {honoured}. Refused at start, saying why: {refused}. relay's RELAY_*"
        " variables win over the Proxy's. Every variable: docs/proxy.md.",
    )
