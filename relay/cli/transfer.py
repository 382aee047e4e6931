"""``relay flags export|import``: a project's flags of one environment to and from a file in
Unleash 8.2's export format, on the standalone store (``relay.cli`` gives them its store
settings and ``--project``). The same service as ``/api/admin/features-batch``: an import
is all or nothing, its changes logged as made by the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay.core.audit import Actor
from relay.core.errors import InvalidInput

if TYPE_CHECKING:
    from relay.settings import Settings
    from relay.store.sql import Database


def add_commands(flag_commands: Any) -> list[argparse.ArgumentParser]:
    """The two commands' parsers (``flag_commands``: the ``flags`` subparsers)."""
    export = flag_commands.add_parser(
        "export",
        help="print a project's flags in one environment in Unleash's export format (JSON)",
    )
    load = flag_commands.add_parser(
        "import",
        help="import a file in Unleash's export format into a project's environment"
        " (all or nothing)",
    )
    load.add_argument("file", type=Path, help="the export file (JSON)")
    for command in (export, load):
        command.add_argument(
            "--environment", default="development", help="the environment (default: development)"
        )
    return [export, load]


async def run(db: Database, settings: Settings, args: argparse.Namespace) -> str:
    """The command's output: the export file, or a line saying what was imported. What it
    needs is imported here: ``relay.cli`` loads this module for every command (``relay
    serve``, ``relay health``), and the export format's models take 25 ms to import."""
    from relay.central.event_records import EventLog
    from relay.central.flags.dependency_records import DependencyRecords
    from relay.central.flags.flag_records import FlagRecords
    from relay.central.flags.tag_records import TagRecords
    from relay.central.flags.transfer import ImportStorage, TransferService
    from relay.central.flags.transfer_records import TransferRecords
    from relay.central.flags.writes import Writer
    from relay.wire.transfer import ExportQuery, ExportResult, ImportBody

    writer = Writer(db, events=EventLog(db, settings.event_log_kept))
    imports = ImportStorage(FlagRecords(), TagRecords(), DependencyRecords())
    service = TransferService(writer, TransferRecords(), imports)
    actor = Actor.command_line()
    if args.flag_command == "export":
        query = ExportQuery(environment=args.environment, project=args.project)
        return (await service.export(actor, query)).model_dump_json(exclude_none=True, indent=2)
    try:
        text = args.file.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {args.file}: {exc.strerror}") from None
    data = ExportResult.model_validate_json(text)
    body = ImportBody(project=args.project, environment=args.environment, data=data)
    await service.import_(actor, body)
    return f"imported {len(data.features)} flags into {args.project}/{args.environment}"
