"""``relay serve | keys ... | flags ... | healthcheck`` (and, for developers,
``settings-docs``); the commands on the store are ``relay.cli.store``'s, Unleash Edge's
``relay edge|offline|health|ready`` are read by ``relay.cli.edge``, the Unleash Proxy's
``relay proxy`` by ``relay.cli.proxy``. Options with no command before
them are ``serve``'s (the image's command is ``serve``: ``docker run IMAGE --mode relay`` is
``relay serve --mode relay``).

Flags of ``serve`` are generated from the settings model (``relay.settings.flags``), so
``--help`` documents every setting with its environment variable and default. Errors an
operator can fix (bad settings, a busy port, an unwritable data dir) end the process with
one line on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from relay import logs
from relay.cli import store as store_cli
from relay.cli.arguments import RedactingParser
from relay.cli.edge.command_line import asked_log_format, is_edge_command
from relay.cli.starting import EXIT_CONFIG, start
from relay.process.server import noted_ports, serve
from relay.settings import Settings, SettingsError, load_settings
from relay.settings.flags import overrides, settings_flags


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if is_edge_command(given):  # each command's modules imported when it runs: 0.1 s less
        from relay.cli.edge.run import main as edge_main  # for every other command

        return edge_main(given)
    if given[:1] == ["proxy"]:
        from relay.cli.proxy.run import main as proxy_main

        return proxy_main(given[1:])
    if given and given[0].startswith("-") and given[0] not in _OURS_FIRST:
        given = ["serve", *given]  # the image's `docker run IMAGE --mode relay` (Dockerfile)
    asked = asked_log_format(given, {k: v for k, v in os.environ.items() if k != "LOG_FORMAT"})
    RedactingParser.json_errors = asked is logs.LogFormat.JSON
    parser = _parser()
    args = parser.parse_args(given)
    args.asked_log_format = asked
    if hasattr(args, "tool"):  # a developer's tool: no settings to load
        done: int = args.tool(args)
        return done
    if not hasattr(args, "run"):
        parser.print_help()
        return EXIT_CONFIG
    return start(lambda: _ours(args), lambda s: args.run(s, args), asked)


_OURS_FIRST = ("-h", "--help", "--version")  # options of `relay` itself, not of `serve`


def _ours(args: argparse.Namespace) -> Settings:
    """The settings of relay's own commands; when they fail while Edge's variables are set,
    the error says which command reads those."""
    try:
        return load_settings(overrides(args), args.config)
    except SettingsError as exc:
        edge = [name for name in ("UPSTREAM_URL", "TOKENS") if os.environ.get(name)]
        if not edge:
            raise
        names = " and ".join(edge)
        raise SettingsError(f"{exc} ({names}: Edge's names, read by `relay edge`)") from None


def _parser() -> argparse.ArgumentParser:
    parser = RedactingParser(
        prog="relay",
        description="Feature-flag metrics relay and standalone central service "
        "(Unleash-compatible). Settings: defaults < --config TOML file < RELAY_* "
        "environment variables < flags.",
        epilog="Unleash Edge's command line and variables: relay edge|offline|health|ready"
        " (relay edge --help; docs/edge.md). The Unleash Proxy's variables: relay proxy"
        " (relay proxy --help; docs/proxy.md).",
    )
    parser.add_argument("--version", action="version", version=f"relay {version('relay')}")
    commands = parser.add_subparsers(title="commands")
    serve = commands.add_parser(
        "serve",
        help="run the service",
        description=_serve_help(),
        usage="relay serve [--config FILE] [--SETTING VALUE ...] (the settings: below)",
    )
    settings_flags(serve)
    serve.set_defaults(run=_serve)

    store_cli.add_key_commands(commands)
    store_cli.add_flag_commands(commands)

    health = commands.add_parser(
        "healthcheck",
        help="exit 0 when the instances running from the data dir (or the port given)"
        " answer /health (for containers)",
    )
    settings_flags(health, only=("mode", "port", "data_dir"), title="which instance to check")
    health.set_defaults(run=_healthcheck)

    # For developers, so not in --help: the commands listed are fixed before it is added
    # (argparse 3.11 shows a help=SUPPRESS command as "==SUPPRESS==").
    commands.metavar = "{" + ",".join(commands.choices) + "}"
    docs = commands.add_parser(
        "settings-docs",
        description="Rewrite the documents generated from the settings model (docs/settings.md, "
        "config/*.toml, the chart's values schema) in ROOT; --check only lists stale ones.",
    )
    docs.add_argument(
        "root",
        nargs="?",
        type=Path,
        default=Path(),
        metavar="ROOT",
        help="the repository (default: .)",
    )
    docs.add_argument("--check", action="store_true", help="exit 1 listing each stale file")
    docs.set_defaults(tool=_settings_docs)
    return parser


def _serve_help() -> str:
    return (
        "Run the service. Each setting is also the variable in brackets (RELAY_<NAME>);"
        " the settings of every mode come first, then each mode's (docs/settings.md)."
    )


def _settings_docs(args: argparse.Namespace) -> int:
    from relay.cli import settings_docs  # a developer's tool: never imported to serve

    return settings_docs.run(args.root, check=args.check)


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    return serve(settings, json_errors=args.asked_log_format is logs.LogFormat.JSON)


def _healthcheck(settings: Settings, args: argparse.Namespace) -> int:
    """The instances started from the data dir (whichever command line started them: each
    noted its port there), or the port given; never a port guessed, where another server may
    answer. One line says what was checked; exit 0 when every one is healthy."""
    if settings.port is not None:
        checked = {f"port {settings.port}": settings.port}
    else:
        noted = noted_ports(settings.data_dir)
        checked = {f"pid {pid}, port {port}": port for pid, port in sorted(noted.items())}
    if not checked:
        logs.error_line(
            f"relay: unhealthy: no instance is running from data dir {settings.data_dir}"
            " (--data-dir DIR, or RELAY_DATA_DIR, says which; --port N checks a port)",
            args.asked_log_format,
        )
        return 1
    sick = [why for what, port in checked.items() if (why := _unhealthy(what, port))]
    for why in sick:
        logs.error_line(f"relay: unhealthy: {why}", args.asked_log_format)
    if not sick:
        print(f"healthy: {', '.join(checked)} (data dir {settings.data_dir})")
    return 1 if sick else 0


def _unhealthy(what: str, port: int) -> str | None:
    url = f"http://127.0.0.1:{port}/health"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return None if response.status == 200 else f"{url} ({what}) answered {response.status}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{url} ({what}): {getattr(exc, 'reason', exc)}"


if __name__ == "__main__":
    sys.exit(main())
