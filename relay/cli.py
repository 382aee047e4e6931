"""``relay serve | keys create | flags create|on|off|list|evaluate|export|import |
healthcheck`` (and, for developers, ``settings-docs``); Unleash Edge's ``relay
edge|offline|health|ready`` are read by ``relay.edge_cli``. Options with no command before
them are ``serve``'s (the image's command is ``serve``: ``docker run IMAGE --mode relay`` is
``relay serve --mode relay``).

Flags of ``serve`` are generated from the settings model, so ``--help`` documents every
setting with its environment variable and default. Errors an operator can fix (bad
settings, a busy port, an unwritable data dir) end the process with one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo

from relay import logs, settings_docs, transfer_cli
from relay.api.errors import from_validation
from relay.arguments import RedactingParser
from relay.core.audit import Actor
from relay.core.errors import DomainError
from relay.edge_cli.command_line import asked_log_format, is_edge_command
from relay.edge_cli.run import main as edge_main
from relay.process.server import noted_ports, serve
from relay.proxy_cli.run import main as proxy_main
from relay.settings import Mode, Settings, SettingsError, load_settings
from relay.settings_usage import usage
from relay.starting import EXIT_CONFIG, start
from relay.store.sql import Database
from relay.wire.admin import CreateApiKey
from relay.wire.common import KeyType
from relay.wire.flags import CreateFlag, FlagOut, FlagType

if TYPE_CHECKING:
    from relay.central.key_store import KeyRecord


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if is_edge_command(given):
        return edge_main(given)
    if given[:1] == ["proxy"]:
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
        return load_settings(_overrides(args), args.config)
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
    _settings_flags(serve)
    serve.set_defaults(run=_serve)

    keys = commands.add_parser("keys", help="manage API keys (standalone store)")
    key_commands = keys.add_subparsers(title="keys commands")
    create = key_commands.add_parser("create", help="create an API key and print it once")
    create.add_argument(
        "--type",
        choices=[t.value for t in KeyType],
        default="client",
        help="the key's type (default: client)",
    )
    create.add_argument(
        "--environment",
        default=None,
        help="the key's environment, e.g. development: required for client and frontend keys",
    )
    create.add_argument(
        "--project",
        action="append",
        dest="projects",
        metavar="PROJECT",
        help="project the key may use (repeatable; default: all)",
    )
    create.add_argument("--name", dest="token_name", default=None, help="a label for the key")
    _settings_flags(create, only=_STORE_SETTINGS)
    create.set_defaults(run=_keys_create)
    listing = key_commands.add_parser(
        "list", help="list the keys, one a line: id, type, projects, environment, name, last use"
    )
    _settings_flags(listing, only=_STORE_SETTINGS)
    listing.set_defaults(run=_keys_list)
    revoke = key_commands.add_parser(
        "revoke", help="revoke a key by its id (or its name); a running service drops it within 2 s"
    )
    revoke.add_argument(
        "name_or_id", metavar="ID_OR_NAME", help="the key's id, or its name (relay keys list)"
    )
    _settings_flags(revoke, only=_STORE_SETTINGS)
    revoke.set_defaults(run=_keys_revoke)
    _flag_commands(commands)

    health = commands.add_parser(
        "healthcheck",
        help="exit 0 when the instances running from the data dir (or the port given)"
        " answer /health (for containers)",
    )
    _settings_flags(health, only=("mode", "port", "data_dir"), title="which instance to check")
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


_STORE_SETTINGS = (
    "data_dir",
    "database_url",
    "database_pool_size",
    "database_timeout",
    "sqlite_synchronous",
    "event_log_kept",
)


def _flag_commands(commands: Any) -> None:
    """``relay flags create|on|off|list``: flags of the standalone store, for scripts and
    first steps. A running service sees the change within its poll interval (1 s)."""
    flags = commands.add_parser("flags", help="manage feature flags (standalone store)")
    flag_commands = flags.add_subparsers(title="flags commands", dest="flag_command")
    create = flag_commands.add_parser("create", help="create a flag (off everywhere)")
    create.add_argument("name", help="the new flag's name")
    create.add_argument(
        "--type",
        choices=[t.value for t in FlagType],
        default="release",
        help="its type (default: release)",
    )
    create.add_argument("--description", default=None, help="what it is for (default: none)")
    switches = [
        flag_commands.add_parser(state, help=f"turn a flag {state} in an environment")
        for state in ("on", "off")
    ]
    for switch in switches:
        switch.add_argument("name", help="the flag's name")
        switch.add_argument(
            "--environment", default="development", help="the environment (default: development)"
        )
    listing = flag_commands.add_parser("list", help="list a project's flags, one a line")
    evaluate = flag_commands.add_parser(
        "evaluate", help="evaluate a flag for a context: one JSON object (enabled, variant, reason)"
    )
    evaluate.add_argument("name", help="the flag's name")
    evaluate.add_argument(
        "--context",
        action="extend",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="userId, sessionId, remoteAddress, appName, or a property (repeatable)",
    )
    evaluate.add_argument(
        "--environment", default="development", help="the environment (default: development)"
    )
    transfers = transfer_cli.add_commands(flag_commands)
    for command in (create, *switches, listing, evaluate, *transfers):
        if command is not evaluate:
            lookup = command in switches  # on/off find the flag in whichever project holds it
            command.add_argument(
                "--project",
                default=None if lookup else "default",
                help="the flag's project (default: the flag's own)"
                if lookup
                else "the project (default: default)",
            )
        _settings_flags(command, only=_STORE_SETTINGS)
        command.set_defaults(run=_flags)


def _serve_help() -> str:
    return (
        "Run the service. Each setting is also the variable in brackets (RELAY_<NAME>);"
        " the settings of every mode come first, then each mode's (docs/settings.md)."
    )


_GROUPS = {
    None: "settings of every mode",
    Mode.CENTRAL: "standalone mode",
    Mode.EDGE: "relay mode (offline mode reads client_tokens, frontend_tokens)",
    Mode.OFFLINE: "offline mode",
}


def _settings_flags(
    parser: argparse.ArgumentParser,
    only: Sequence[str] | None = None,
    title: str = "the store: where the standalone keeps its data",
) -> None:
    """A flag per setting (or those ``only`` names, under ``title``), grouped by the mode
    that reads it: ``--name VALUE``, a boolean ``--name`` / ``--no-name``."""
    parser.add_argument(
        "--config",
        type=Path,
        default=os.environ.get("RELAY_CONFIG"),
        metavar="FILE",
        help="TOML settings file, examples in config/ [RELAY_CONFIG]",
    )
    groups = {mode: parser.add_argument_group(title) for mode, title in _GROUPS.items()}
    store = parser.add_argument_group(title)
    for name, field in Settings.model_fields.items():
        if only is not None and name not in only:
            continue
        group = groups[usage(field).mode] if only is None else store
        flag = "--" + name.replace("_", "-")
        if field.annotation is bool:
            group.add_argument(
                flag,
                dest=f"setting_{name}",
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=_field_help(name, field),
            )
            continue
        group.add_argument(
            flag,
            dest=f"setting_{name}",
            default=argparse.SUPPRESS,
            metavar=_metavar(field),
            help=_field_help(name, field),
        )


def _metavar(field: FieldInfo) -> str:
    """What a value looks like: its choices, N, A,B for a list, else VALUE."""
    kind = field.annotation
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "{" + ",".join(str(member.value) for member in kind) + "}"
    if kind in (int, float, int | None, float | None):
        return "N"
    if isinstance(field.get_default(call_default_factory=True), list):
        return "A,B"
    return "VALUE"


def _field_help(name: str, field: FieldInfo) -> str:
    """The description, its variable and its default, short: ``[RELAY_PORT, 4242]``."""
    default = field.get_default(call_default_factory=True)
    if isinstance(default, bool):
        shown = "on" if default else "off"
    elif isinstance(default, enum.Enum):
        shown = str(default.value)
    else:
        shown = ",".join(default) if isinstance(default, list) else str(default or "")
    where = f"RELAY_{name.upper()}, default {shown}" if shown else f"RELAY_{name.upper()}"
    return f"{field.description} [{where}]".replace("%", "%%")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    prefix = "setting_"
    return {k[len(prefix) :]: v for k, v in vars(args).items() if k.startswith(prefix)}


def _settings_docs(args: argparse.Namespace) -> int:
    return settings_docs.run(args.root, check=args.check)


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    return serve(settings, json_errors=args.asked_log_format is logs.LogFormat.JSON)


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    # imported here, so that ``relay serve`` loads only what the chosen mode needs
    from relay.central.wiring import key_service

    async def create(db: Database) -> str:
        request = CreateApiKey(
            type=KeyType(args.type),
            environment=args.environment,
            projects=args.projects or ["*"],
            tokenName=args.token_name,
        )
        secret, record = await key_service(db, settings).issue(Actor.command_line(), request)
        # the key alone on stdout (scripts take it: KEY=$(relay keys create ...)), what was
        # done on stderr
        _said(f"created {_key_said(record)}: shown once, above; stored hashed")
        return secret

    return _on_store(settings, create)


def _keys_list(settings: Settings, args: argparse.Namespace) -> int:
    from relay.central.wiring import key_service

    async def listing(db: Database) -> str:
        found = await key_service(db, settings).listed()
        if not found:
            _said("no keys in the store")
        return "\n".join(_key_line(k) for k in found)

    return _on_store(settings, listing)


def _key_said(record: KeyRecord) -> str:
    """A key in words, without its secret: ``a client key of development, projects *``."""
    p = record.principal
    where = (
        "" if p.type is KeyType.ADMIN else f" of {p.environment}, projects {','.join(p.projects)}"
    )
    named = f" named {p.token_name}" if p.token_name else ""
    return f"a {p.type.value} key{where}{named} (id {record.id})"


def _said(line: str) -> None:
    """What a command did, for the person at the terminal: on stderr, so that stdout
    stays what a script reads."""
    print(line, file=sys.stderr)


def _key_line(record: KeyRecord) -> str:
    p = record.principal
    used = "never" if record.last_used_at is None else _iso(record.last_used_at)
    fields = (record.id, p.type.value, ",".join(p.projects), p.environment, p.token_name or "-")
    return "\t".join((*fields, p.display, f"created {_iso(record.created_at)}", f"used {used}"))


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _keys_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from relay.central.wiring import key_service

    async def revoke(db: Database) -> str:
        record = await key_service(db, settings).revoke(Actor.command_line(), args.name_or_id)
        return f"revoked {record.id} {record.principal.display}"

    return _on_store(settings, revoke)


def _flags(settings: Settings, args: argparse.Namespace) -> int:
    from relay.central.events import EventLog
    from relay.central.flags.flags import FlagService
    from relay.central.flags.playground import evaluate_on
    from relay.central.flags.writes import Writer

    async def run(db: Database) -> str:
        flags = FlagService(Writer(db, events=EventLog(db, settings.event_log_kept)))
        actor = Actor.command_line()
        match args.flag_command:
            case "create":
                body = CreateFlag(name=args.name, type=args.type, description=args.description)
                created = await flags.create(actor, args.project, body)
                return f"created {created.name} in project {created.project}, off everywhere"
            case "on" | "off":
                project = args.project or await flags.project_of(args.name)
                await flags.set_enabled(
                    actor, project, args.name, args.environment, args.flag_command == "on"
                )
                return (
                    f"{args.name} is {args.flag_command} in {args.environment}"
                    f" (project {project}); a running service serves it within 2 s"
                )
            case "export" | "import":
                return await transfer_cli.run(db, settings, args)
            case "evaluate":
                found = await evaluate_on(db, args.name, args.environment, args.context)
                return json.dumps(found, ensure_ascii=False)
            case _:
                listed = await flags.of_project(args.project, known=True)
                if not listed:
                    _said(f"no flags in project {args.project}")
                return "\n".join(_flag_line(f) for f in listed)

    return _on_store(settings, run)


def _flag_line(flag: FlagOut) -> str:
    states = " ".join(f"{e.name}={'on' if e.enabled else 'off'}" for e in flag.environments)
    return f"{flag.name}\t{flag.project}\t{flag.type}\t{states}"


def _on_store(settings: Settings, work: Callable[[Database], Awaitable[str]]) -> int:
    """Run ``work`` on the standalone store; print what it returns, or one line of error."""
    from relay.central.wiring import central_database

    async def run() -> str:
        db = central_database(settings)
        await db.open()
        try:
            return await work(db)
        finally:
            await db.close()

    try:
        output = asyncio.run(run())
    except ValidationError as exc:
        print(f"relay: error: {from_validation(exc, root='').message}", file=sys.stderr)
        return EXIT_CONFIG
    except DomainError as exc:
        print(f"relay: error: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    if output:
        print(output)
    return 0


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
