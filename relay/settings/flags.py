"""The settings as command-line flags (``relay serve`` and the commands on the store):
one per setting, named after it, grouped by the mode that reads it, a boolean as
``--name`` / ``--no-name``, each help saying its variable and its default."""

from __future__ import annotations

import argparse
import enum
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from relay.settings import Mode, Settings
from relay.settings.usage import usage

STORE_SETTINGS = (  # where the standalone keeps its data
    "data_dir",
    "database_url",
    "database_pool_size",
    "database_timeout",
    "sqlite_synchronous",
    "event_log_kept",
)


_GROUPS = {
    None: "settings of every mode",
    Mode.CENTRAL: "standalone mode",
    Mode.EDGE: "relay mode (offline mode reads client_tokens, frontend_tokens)",
    Mode.OFFLINE: "offline mode",
}


def settings_flags(
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


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    prefix = "setting_"
    return {k[len(prefix) :]: v for k, v in vars(args).items() if k.startswith(prefix)}
