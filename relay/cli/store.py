"""``relay keys create|list|revoke`` and ``relay flags create|on|off|list|evaluate|export|
import``: the standalone store from the command line (``relay.cli`` puts them under
``relay``), for scripts and first steps. Each prints what a script reads on stdout (a key,
a list), and says what it did (on stderr when stdout is the key); an error an operator can
fix is one line, exit 2."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from relay.cli import transfer as transfer_cli
from relay.cli.starting import EXIT_CONFIG
from relay.core.audit import Actor
from relay.core.errors import DomainError
from relay.settings.flags import STORE_SETTINGS, settings_flags
from relay.wire.common import FlagType, KeyType

if TYPE_CHECKING:
    from relay.central.key_store import KeyRecord
    from relay.settings import Settings
    from relay.store.sql import Database
    from relay.wire.flags import FlagOut


def add_key_commands(commands: Any) -> None:
    """``relay keys create|list|revoke``: API keys of the standalone store."""
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
    settings_flags(create, only=STORE_SETTINGS)
    create.set_defaults(run=_keys_create)
    listing = key_commands.add_parser(
        "list", help="list the keys, one a line: id, type, projects, environment, name, last use"
    )
    settings_flags(listing, only=STORE_SETTINGS)
    listing.set_defaults(run=_keys_list)
    revoke = key_commands.add_parser(
        "revoke", help="revoke a key by its id (or its name); a running service drops it within 2 s"
    )
    revoke.add_argument(
        "name_or_id", metavar="ID_OR_NAME", help="the key's id, or its name (relay keys list)"
    )
    settings_flags(revoke, only=STORE_SETTINGS)
    revoke.set_defaults(run=_keys_revoke)


def add_flag_commands(commands: Any) -> None:
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
        settings_flags(command, only=STORE_SETTINGS)
        command.set_defaults(run=_flags)


def _keys_create(settings: Settings, args: argparse.Namespace) -> int:
    # imported here, as in every command below: ``relay serve`` and ``relay health`` load
    # this module, and only what they need (the store's modules and models: 60 ms a start)
    from relay.central.wiring import key_service
    from relay.wire.admin import CreateApiKey

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
    from relay.central.event_records import EventLog
    from relay.central.flags.flag_records import FlagRecords
    from relay.central.flags.flags import FlagService
    from relay.central.flags.playground import evaluate_on
    from relay.central.flags.writes import Writer
    from relay.wire.flags import CreateFlag

    async def run(db: Database) -> str:
        writer = Writer(db, events=EventLog(db, settings.event_log_kept))
        flags = FlagService(writer, FlagRecords())
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
    from relay.api.errors import from_validation
    from relay.central.database import central_database

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
