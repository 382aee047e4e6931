"""What the settings model is made of beyond pydantic: the modes, each setting's ``Usage``
(what its description leaves out) and the types with checks of their own (comma-separated
lists, networks, the upstream's URL). Apart from ``relay.settings`` so that the model stays
one readable table of settings."""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic.fields import FieldInfo


class Mode(enum.StrEnum):
    """The user-facing names of the modes; in code their parts are ``central`` and ``edge``
    (``relay.central``, ``relay.edge``). Offline mode is a relay without an upstream: its
    flags come from a file (``relay.edge.offline``)."""

    CENTRAL = "standalone"
    EDGE = "relay"
    OFFLINE = "offline"


@dataclass(frozen=True)
class Usage:
    """What a setting's description leaves out, for the model's checks and the docs.

    Annotated on a field (``Annotated[float, Usage(Mode.EDGE)]``); a field without one
    applies in both modes, is optional, and is documented by its description alone.
    """

    mode: Mode | None = None  # the only mode the setting applies in
    required: bool = False  # in that mode (a start-up error without it)
    secret: bool = False  # may hold keys or a password: better the environment than a file
    note: str | None = None  # more for the example files' comment, after the description
    example: object = None  # the value config/*.toml shows for no default; a dict: per mode
    offline: bool = False  # a relay-mode setting that offline mode reads too

    def applies(self, mode: Mode) -> bool:
        """Whether the setting is read in ``mode`` (None: in every mode)."""
        return self.mode in (None, mode) or (self.offline and mode is Mode.OFFLINE)


def usage(field: FieldInfo) -> Usage:
    """The field's Usage; the default one (both modes, optional) when it has none."""
    return next((m for m in field.metadata if isinstance(m, Usage)), Usage())


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


# A list given as one comma-separated string (in the environment or on the command line: the
# settings' loader reads no value as JSON, ``relay.settings``)
CommaList = Annotated[list[str], BeforeValidator(_comma_list)]


def _networks(value: list[str]) -> list[str]:
    for item in value:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or CIDR") from None
    return value


# IP addresses and CIDRs, comma-separated
NetworkList = Annotated[CommaList, AfterValidator(_networks)]


def _upstream_url(value: str) -> str:
    if not value.startswith(("http://", "https://")) or value[-3:] == "://":
        raise ValueError("must be an http:// or https:// URL")
    if "@" in value.split("://", 1)[1].split("/", 1)[0]:
        # the upstream takes keys in Authorization (RELAY_UPSTREAM_TOKENS); user:password in
        # the URL clashes with that header on every request, and would end up in logs
        raise ValueError("must not contain user:password; keys go in upstream_tokens")
    return value.rstrip("/")


# An http(s) URL without credentials, kept without its trailing slash
UpstreamUrl = Annotated[str, AfterValidator(_upstream_url)]
