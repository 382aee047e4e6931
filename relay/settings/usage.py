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


def _base_path(value: str) -> str:
    """The Unleash Proxy's ``sanitizeBasePath``: trimmed, a leading ``/`` added, one
    trailing ``/`` taken away; blank is the root."""
    path = value.strip()
    if not path:
        return ""
    if any(c in path for c in "{}?#%\\") or any(c.isspace() for c in path):
        raise ValueError("must be a plain path: no spaces, braces, ?, #, % or backslash")
    path = path if path.startswith("/") else f"/{path}"
    return path.removesuffix("/")


# A path prefix ("" or "/a/b"), as the Unleash Proxy reads PROXY_BASE_PATH
BasePath = Annotated[str, AfterValidator(_base_path)]
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _header_name(value: str) -> str:
    if not value or not set(value) <= _TOKEN:
        raise ValueError("must be an HTTP header name (letters, digits, - and the like)")
    return value


# An HTTP header's name (RFC 9110 token)
HeaderName = Annotated[str, AfterValidator(_header_name)]


class SettingNames(enum.StrEnum):
    """Whose names messages give settings: relay's, or those of the command line the
    service was started from (``relay edge``: Unleash Edge's, ``relay proxy``: the Unleash
    Proxy's), so that an operator reads the names they wrote."""

    RELAY = "relay"
    EDGE = "edge"
    PROXY = "proxy"


_NAMES: dict[tuple[SettingNames, str], str] = {
    (SettingNames.EDGE, "client_tokens"): "TOKENS",
    (SettingNames.EDGE, "upstream_tokens"): "TOKENS",
    (SettingNames.EDGE, "frontend_tokens"): "PRETRUSTED_TOKENS",
    (SettingNames.PROXY, "client_tokens"): "UNLEASH_API_TOKEN",
    (SettingNames.PROXY, "upstream_tokens"): "UNLEASH_API_TOKEN",
    (SettingNames.PROXY, "proxy_client_keys"): "UNLEASH_PROXY_CLIENT_KEYS",
    (SettingNames.PROXY, "proxy_server_keys"): "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS",
    (SettingNames.PROXY, "proxy_project"): "UNLEASH_PROJECT_NAME",
}


def named(setting: str, names: SettingNames) -> str:
    """A setting as a message names it: ``TOKENS`` for ``relay edge``, else relay's own
    name with its variable (``client_tokens (RELAY_CLIENT_TOKENS)``)."""
    return _NAMES.get((names, setting)) or f"{setting} (RELAY_{setting.upper()})"
