"""Edge's command line and environment, read as Edge 20 reads them (``relay.cli.edge.options``)
and turned into relay settings.

``relay [TOP OPTIONS] edge|offline|health|ready [OPTIONS]``: options before the subcommand
are Edge's top-level ones, global ones go anywhere, each may also come from its environment
variable. Precedence: Edge's flags > ``RELAY_*`` variables > Edge's variables > the TOML
file (``RELAY_CONFIG``) > relay's defaults. An unsupported option given anything but Edge's
default is a start-up error naming it; no error quotes a value (values may be keys).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.cli.arguments import RedactingParser
from relay.cli.edge.options import COMMANDS, GLOBAL, OPTIONS, TOP, EdgeOption, Kind, Takes
from relay.cli.edge.options import of_command as options_of
from relay.logs import LogFormat
from relay.settings import SettingsError

MODES = {"edge": "relay", "offline": "offline"}
EMPTY = '""'
_FALSE = {"", "0", "n", "no", "f", "false", "off"}  # clap's falsey values of a flag's variable
_LOG_FORMATS = {"plain": "text", "pretty": "text", "json": "json"}


@dataclass(frozen=True)
class Serve:
    """``relay edge`` or ``relay offline``: the settings they give, and the options given
    that have no effect (said at start)."""

    overrides: dict[str, Any]
    no_effect: tuple[str, ...]


@dataclass(frozen=True)
class Check:
    """``relay health`` or ``relay ready``."""

    url: str
    ca_file: Path | None
    ready: bool


def is_edge_command(argv: Sequence[str]) -> bool:
    """Edge's grammar: a subcommand of Edge's, alone or after options Edge takes before one
    (``relay -p 3063 edge``). Other invocations that start with an option are relay's own
    (``relay --mode relay``: ``serve``'s, see ``relay.cli``)."""
    index = 0
    while index < len(argv):
        argument = argv[index]
        if not argument.startswith("-"):
            return argument in COMMANDS
        name, attached = _option_name(argument)
        option = _BEFORE_COMMAND.get(name)
        if option is None:
            return False
        index += 1 if attached or option.takes is Takes.FLAG else 2
    return False


def _option_name(argument: str) -> tuple[str, bool]:
    """``--name=value`` and ``-nVALUE`` (clap's forms): the name, whether a value is attached."""
    if argument.startswith("--"):
        name, equals, _ = argument.partition("=")
        return name, bool(equals)
    return argument[:2], len(argument) > 2


_BEFORE_COMMAND = {
    name: option
    for option in OPTIONS
    if option.where in (TOP, GLOBAL) and not option.flagless
    for name in (option.flag, *([f"-{option.short}"] if option.short else []))
}


def asked_log_format(argv: Sequence[str], env: Mapping[str, str]) -> LogFormat | None:
    """The log format asked for before any setting is read, for errors found while reading
    them: ``RELAY_LOG_FORMAT``, ``--log-format`` (``-l``), Edge's ``LOG_FORMAT``."""
    asked = env.get("RELAY_LOG_FORMAT") or _flag_value(argv, ("--log-format", "-l"))
    asked = asked or env.get("LOG_FORMAT")
    if asked is None:
        return None
    return LogFormat.JSON if asked.strip().lower() == "json" else LogFormat.TEXT


def _flag_value(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    for index, argument in enumerate(argv):
        name, equals, value = argument.partition("=")
        if name in names:
            return value if equals else (argv[index + 1] if index + 1 < len(argv) else None)
    return None


def parse(argv: Sequence[str], env: Mapping[str, str]) -> Serve | Check:
    """``argv`` (without the program's name) and the environment, as Edge 20 reads them."""
    parser = _parser(asked_log_format(argv, env) is LogFormat.JSON)
    args = vars(parser.parse_args(argv))
    command: str = args.pop("command")
    given = _given(args, env, (*options_of(command), *_top()))
    if command not in MODES:  # a check: the settings of a service it does not start are moot
        values = {o.name: value for o, (_, value) in given.items() if o.kind is Kind.CHECK}
        ca_file = values.get("ca_certificate_file")
        url = str(values.get("edge_url", "http://localhost:3063")).rstrip("/")
        return Check(url, Path(ca_file) if ca_file else None, command == "ready")
    refused = [o for o, (_, v) in given.items() if o.kind is Kind.UNSUPPORTED and not _idle(o, v)]
    if refused:
        raise SettingsError(
            f"relay {command}: not supported: "
            + "; ".join(f"{o.flag} ({o.variable}): {o.why}" for o in refused)
        )
    return _serve(command, given, env)


def _top() -> tuple[EdgeOption, ...]:
    return tuple(o for o in OPTIONS if o.where in (TOP, GLOBAL))


def _given(
    args: dict[str, Any], env: Mapping[str, str], options: Sequence[EdgeOption]
) -> dict[EdgeOption, tuple[str, Any]]:
    """Each option given: ("flag", value) from the command line, else ("env", value)."""
    given: dict[EdgeOption, tuple[str, Any]] = {}
    for option in options:
        if option.kind is Kind.NOT_READ:
            continue
        if option.name in args:
            value = args[option.name]
            if option.takes is Takes.LIST:
                value = [item for part in value for item in _split(part)]
            given[option] = ("flag", value)
        elif env.get(option.variable, "") != "":
            raw = env[option.variable]
            value = raw
            if option.takes is Takes.FLAG:
                value = raw.strip().lower() not in _FALSE
            elif option.takes is Takes.LIST:
                value = _split(raw)
            given[option] = ("env", value)
    return given


def _split(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _idle(option: EdgeOption, value: Any) -> bool:
    """Whether an option given asks for nothing Edge would not do by default."""
    if option.takes is Takes.FLAG:
        return value is False
    if option.takes is Takes.LIST:
        return option.default is not None and value == _split(option.default)
    return option.default is not None and str(value).strip() == option.default


def _serve(command: str, given: dict[EdgeOption, tuple[str, Any]], env: Mapping[str, str]) -> Serve:
    overrides: dict[str, Any] = {"mode": MODES[command]}
    for option, (source, value) in given.items():
        if option.kind is not Kind.SETTING:
            continue
        converted = _CONVERT.get(option.name, _same)(option, value)
        for setting, setting_value in converted.items():
            if source == "flag" or f"RELAY_{setting.upper()}" not in env:
                overrides[setting] = setting_value
    if "RELAY_SETTING_NAMES" not in env:
        overrides["setting_names"] = "edge"  # errors name Edge's options
    if command == "edge":
        if "RELAY_STRICT_KEYS" not in env:
            overrides["strict_keys"] = True  # Edge 20 has no other mode
        _require(overrides, env, "upstream_url", "upstream_url")
        _require(overrides, env, "tokens", "client_tokens")
    no_effect = tuple(o.flag for o in given if o.kind is Kind.NO_EFFECT)
    return Serve(overrides, no_effect)


def _require(overrides: dict[str, Any], env: Mapping[str, str], name: str, setting: str) -> None:
    """Edge's required options, said with Edge's names (unless relay's own are used)."""
    known = setting in overrides or f"RELAY_{setting.upper()}" in env or "RELAY_CONFIG" in env
    if not known:
        option = next(o for o in OPTIONS if o.name == name)
        raise SettingsError(f"relay edge: {option.flag} ({option.variable}) is required")


def _same(option: EdgeOption, value: Any) -> dict[str, Any]:
    return dict.fromkeys(option.ours, value)


def _log_format(option: EdgeOption, value: Any) -> dict[str, Any]:
    ours = _LOG_FORMATS.get(str(value).strip().lower())
    if ours is None:
        raise SettingsError(
            f"{option.flag} ({option.variable}): must be one of {', '.join(_LOG_FORMATS)}"
        )
    return {"log_format": ours}


_LEVELS = {
    "trace": "DEBUG",
    "debug": "DEBUG",
    "info": "INFO",
    "warn": "WARNING",
    "error": "ERROR",
    "off": "CRITICAL",
}


def _rust_log(option: EdgeOption, value: Any) -> dict[str, Any]:
    """``warn``, or directives such as ``info,unleash_edge=debug``: the plain level, else the
    most verbose directive's (what the operator wanted to see)."""
    directives = [d.strip().lower() for d in str(value).split(",") if d.strip()]
    plain = [d for d in directives if "=" not in d]
    levels = [_LEVELS.get(d.rpartition("=")[2]) for d in plain or directives]
    known = [level for level in levels if level is not None]
    if not known:
        raise SettingsError(f"{option.variable}: no level among {', '.join(_LEVELS)}")
    order = list(dict.fromkeys(_LEVELS.values()))
    return {"log_level": known[0] if plain else min(known, key=order.index)}


def _pretrusted(option: EdgeOption, value: list[str]) -> dict[str, Any]:
    if any(":" not in key or "." not in key for key in value):
        raise SettingsError(
            f"{option.flag} ({option.variable}): the secret@environment form is not supported;"
            " give frontend keys as project:environment.secret"
        )
    return {"frontend_tokens": value}


_CONVERT: dict[str, Callable[[EdgeOption, Any], dict[str, Any]]] = {
    "log_format": _log_format,
    "pretrusted_tokens": _pretrusted,
    "rust_log": _rust_log,
}


def _parser(json_errors: bool) -> argparse.ArgumentParser:
    RedactingParser.json_errors = json_errors
    # allow_abbrev off: clap takes an option only by its whole name, so must we
    parser = RedactingParser(
        prog="relay",
        allow_abbrev=False,
        description="Unleash Edge's command line (its open-source release 20.4.1), for moving"
        " from Edge: each option also reads Edge's environment variable; relay's RELAY_*"
        " variables win over Edge's. Relay's own commands: relay --help.",
    )
    _add(parser, _top())
    commands = parser.add_subparsers(dest="command", required=True, metavar="{edge,offline,…}")
    helps = {
        "edge": "run as a relay of an upstream (Edge's edge mode)",
        "offline": "serve flags from a file, no upstream (Edge's offline mode)",
        "health": "exit 0 when a running instance answers /internal-backstage/health",
        "ready": "exit 0 when a running instance is ready (/internal-backstage/ready)",
    }
    for command in COMMANDS:
        sub = commands.add_parser(
            command,
            help=helps[command],
            description=helps[command],
            allow_abbrev=False,
            usage=f"relay [-p PORT] [-i ADDRESS] {command} {_USAGE[command]}",
        )
        _add(sub, options_of(command))
    return parser


_USAGE = {
    "edge": "-u URL -t KEYS [OPTIONS]",
    "offline": "-b FILE -c KEYS [-f KEYS] [OPTIONS]",
    "health": "[-e URL] [-c FILE]",
    "ready": "[-e URL] [-c FILE]",
}
_REFUSED = (
    "Edge's options relay does not support (each a start-up error, unless given Edge's default)"
)


def _add(parser: argparse.ArgumentParser, options: Sequence[EdgeOption]) -> None:
    """The options relay supports first (the subcommand's own, then those of anywhere),
    then in a group of their own those it refuses."""
    shown = [o for o in options if o.kind is not Kind.NOT_READ and not o.flagless]
    supported = sorted(
        (o for o in shown if o.kind is not Kind.UNSUPPORTED), key=lambda o: o.where in (TOP, GLOBAL)
    )
    refused = [o for o in shown if o.kind is Kind.UNSUPPORTED]
    for option in supported:
        _argument(parser, option)
    if refused:
        group = parser.add_argument_group(_REFUSED)
        for option in refused:
            _argument(group, option)


def _argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, option: EdgeOption
) -> None:
    flags = [option.flag] if option.short is None else [f"-{option.short}", option.flag]
    action: dict[Takes, str | type[argparse.Action]] = {
        Takes.VALUE: _Once,
        Takes.LIST: "append",
        Takes.FLAG: "store_true",
    }
    metavar: dict[str, Any] = {
        Takes.VALUE: {"metavar": "VALUE"},
        Takes.LIST: {"metavar": "A,B"},
        Takes.FLAG: {},
    }[option.takes]
    parser.add_argument(
        *flags,
        dest=option.name,
        action=action[option.takes],
        default=argparse.SUPPRESS,
        help=_help(option),
        **metavar,
    )


class _Once(argparse.Action):
    """A value option given twice is an error, as clap makes it (Edge does not set
    ``args_override_self``): argparse would keep the last one silently."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if hasattr(namespace, self.dest):
            raise argparse.ArgumentError(self, "cannot be used multiple times")
        setattr(namespace, self.dest, values)


def _help(option: EdgeOption) -> str:
    """What it sets in relay (or why not), its variable and Edge's default, short."""
    what = {
        Kind.SETTING: f"relay's {', '.join(option.ours)}",
        Kind.CHECK: "",
        Kind.NO_EFFECT: "accepted, no effect",
        Kind.UNSUPPORTED: "",
        Kind.NOT_READ: "",
    }[option.kind]
    parts = [p for p in (what, option.why) if p]
    default = f", default {option.default or EMPTY}" if option.default is not None else ""
    return f"{': '.join(parts)} [{option.variable}{default}]".replace("%", "%%")
