"""The Unleash Proxy's environment (``relay.cli.proxy.variables``), read as the Proxy 1.4.19
reads it, turned into relay settings: relay mode, with the Proxy's paths.

Precedence: relay's ``RELAY_*`` variables > the Proxy's > the file in ``RELAY_CONFIG`` >
``relay proxy``'s defaults where the Proxy's differ from relay's (port 3000, flags fetched
every 5 s, app name ``unleash-proxy``, no ``/proxy/all``) > relay's defaults. A refused
variable is a start-up error naming it and saying why; no error quotes a value (values are
keys as often as not).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from relay.cli.proxy.variables import BY_NAME, VARIABLES, Kind, ProxyVariable
from relay.core.keys import InvalidKey, parse_key
from relay.settings import SettingsError
from relay.wire.common import KeyType

DEFAULTS: dict[str, Any] = {
    "port": 3000,
    "features_refresh_interval": 5.0,
    "app_name": "unleash-proxy",
    "disable_all_endpoint": True,
}
"""The Proxy's defaults, where they are not relay's."""
_TRUE = ("true", "1", "t")  # the Proxy's safeBoolean
_LEVELS = {
    "debug": "DEBUG",
    "info": "INFO",
    "warn": "WARNING",
    "error": "ERROR",
    "fatal": "CRITICAL",
}
_TRUSTED_NAMES = {  # Express's names of address ranges (proxy-addr)
    "loopback": ["127.0.0.1/8", "::1/128"],
    "linklocal": ["169.254.0.0/16", "fe80::/10"],
    "uniquelocal": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
}
_NUMBER = re.compile(r"\s*([+-]?\d+)")


@dataclass(frozen=True)
class Serve:
    """The settings ``relay proxy`` gives, and the lines it says at start of variables
    accepted whose job relay does another way."""

    overrides: dict[str, Any]
    said: tuple[str, ...]
    sources: dict[str, str]  # setting -> the Proxy's variable it came from, for errors


def read(env: Mapping[str, str]) -> Serve:
    """The settings of ``relay proxy`` from ``env``, or ``SettingsError`` naming the
    variable that cannot be honoured."""
    given = {v.name: env[v.name] for v in VARIABLES if env.get(v.name, "") != ""}
    refused = [
        BY_NAME[name]
        for name, value in given.items()
        if BY_NAME[name].kind is Kind.REFUSED and not _idle(name, value, given)
    ]
    if refused:
        raise SettingsError(
            "relay proxy: not supported: " + "; ".join(f"{v.name}: {v.why}" for v in refused)
        )
    _require(given, env)
    settings: dict[str, Any] = {}
    sources: dict[str, str] = {}
    kept = _configured(env)
    settings.update({k: v for k, v in DEFAULTS.items() if k not in kept})
    for name, value in given.items():
        convert = _CONVERT.get(name)
        if convert is None:
            continue
        for setting, converted in convert(value, given).items():
            settings[setting] = converted
            sources[setting] = name
    overrides = {k: v for k, v in settings.items() if f"RELAY_{k.upper()}" not in env}
    overrides |= {"mode": "relay", "setting_names": "proxy"}  # what relay proxy is
    said = tuple(
        f"{v.name}: accepted, done another way: {v.why}"
        for v in VARIABLES
        if v.kind is Kind.SAID and v.name in given and not _idle(v.name, given[v.name], given)
    )
    return Serve(overrides, said, sources)


def _idle(name: str, value: str, given: Mapping[str, str]) -> bool:
    """Whether a refused (or said) variable's value asks for nothing the Proxy would not
    do by default."""
    match name:
        case "CORS_PREFLIGHT_CONTINUE" | "ENABLE_OAS":
            return value not in _TRUE
        case "HTTP_OPTIONS_REJECT_UNAUTHORIZED":
            return value in _TRUE
        case "EXP_BOOTSTRAP_AUTHORIZATION":
            return "EXP_BOOTSTRAP_URL" not in given  # the Proxy reads it only with a URL
        case "UNLEASH_METRICS_JITTER":
            return _number_or_none(value) == 0
        case _:
            return False


def _require(given: Mapping[str, str], env: Mapping[str, str]) -> None:
    """The Proxy's three required settings, in its words, unless relay's names give them."""
    needs = [
        ("UNLEASH_URL", "unleashUrl", ("UNLEASH_URL",), "RELAY_UPSTREAM_URL"),
        ("UNLEASH_API_TOKEN", "unleashApiToken", ("UNLEASH_API_TOKEN",), "RELAY_CLIENT_TOKENS"),
        (
            "UNLEASH_PROXY_CLIENT_KEYS",
            "clientKeys",
            ("UNLEASH_PROXY_CLIENT_KEYS", "UNLEASH_PROXY_SECRETS"),
            "RELAY_PROXY_CLIENT_KEYS",
        ),
    ]
    for variable, option, names, ours in needs:
        if not any(n in given for n in names) and ours not in env and "RELAY_CONFIG" not in env:
            raise SettingsError(f"You must specify the {option} option ({variable})")


def _configured(env: Mapping[str, str]) -> set[str]:
    """The settings the file in ``RELAY_CONFIG`` sets (they win over relay proxy's
    defaults); a file that does not read is ``load_settings``'s to report."""
    path = env.get("RELAY_CONFIG")
    if not path:
        return set()
    try:
        return set(tomllib.loads(Path(path).read_text()))
    except (OSError, ValueError):
        return set()


def _number(name: str, value: str) -> int:
    found = _number_or_none(value)
    if found is None:
        raise SettingsError(f"{name}: must be a number")
    return found


def _number_or_none(value: str) -> int | None:
    """JavaScript's ``parseInt``: the number a text starts with (``5000ms`` is 5000)."""
    found = _NUMBER.match(value)
    return int(found[1]) if found else None


def _url(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    url = value.strip().rstrip("/")
    if not url.endswith("/api") or len(url) == len("/api"):
        raise SettingsError(
            "UNLEASH_URL: must be Unleash's API URL, ending in /api (as the Proxy's SDK was"
            " given: http://unleash:4242/api)"
        )
    return {"upstream_url": url.removesuffix("/api")}


def _api_token(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    key = value.strip()
    try:
        parse_key(key, KeyType.CLIENT)
    except InvalidKey:
        raise SettingsError(
            "UNLEASH_API_TOKEN: must be an Unleash client key, project:environment.secret: its"
            " environment is the one served"
        ) from None
    return {"upstream_tokens": [key], "client_tokens": [key]}


def _keys(name: str, setting: str) -> Callable[[str, Mapping[str, str]], dict[str, Any]]:
    def convert(value: str, given: Mapping[str, str]) -> dict[str, Any]:
        keys = [key for key in (k.strip() for k in re.split(r",\s*", value)) if key]
        if not keys:
            raise SettingsError(f"{name}: no key in it")
        return {setting: keys}

    return convert


def _secrets(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    if "UNLEASH_PROXY_CLIENT_KEYS" in given:
        return {}  # the newer name wins, as in the Proxy
    return _keys("UNLEASH_PROXY_SECRETS", "proxy_client_keys")(value, given)


def _port(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    return {"port": _number("PORT", value)}


def _proxy_port(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    return {} if "PORT" in given else {"port": _number("PROXY_PORT", value)}


def _same(setting: str) -> Callable[[str, Mapping[str, str]], dict[str, Any]]:
    def convert(value: str, given: Mapping[str, str]) -> dict[str, Any]:
        return {setting: value}

    return convert


def _milliseconds(
    name: str, setting: str, least: int
) -> Callable[[str, Mapping[str, str]], dict[str, Any]]:
    def convert(value: str, given: Mapping[str, str]) -> dict[str, Any]:
        milliseconds = _number(name, value)
        if milliseconds < least:
            raise SettingsError(f"{name}: at least {least} (milliseconds)")
        return {setting: milliseconds / 1000}

    return convert


def _trust_proxy(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    """Express's ``trust proxy``: true, false, a hop count, or addresses and names."""
    text = value.strip()
    if text.lower() == "false":
        return {"trust_proxy": False}
    if text.lower() == "true":
        return {"trust_proxy": True, "proxy_trusted_servers": ["0.0.0.0/0", "::/0"]}
    if text.isdigit():
        raise SettingsError(
            "TRUST_PROXY: a number of hops is not supported: give the proxies' addresses or"
            " CIDRs (TRUST_PROXY=10.0.0.0/8), or loopback, linklocal, uniquelocal"
        )
    servers = [
        address
        for item in re.split(r"\s*,\s*", text)
        if item
        for address in _TRUSTED_NAMES.get(item, [item])
    ]
    return {"trust_proxy": True, "proxy_trusted_servers": servers}


def _log_level(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    level = _LEVELS.get(value.strip().lower())
    if level is None:
        raise SettingsError(f"LOG_LEVEL: must be one of {', '.join(_LEVELS)}")
    return {"log_level": level}


def _origins(value: str, given: Mapping[str, str]) -> dict[str, Any]:
    origins = re.split(r",\s*", value) if "," in value else [value]
    return {"frontend_cors_origins": [origin for origin in origins if origin]}


def _flag(setting: str, invert: bool = False) -> Callable[[str, Mapping[str, str]], dict[str, Any]]:
    def convert(value: str, given: Mapping[str, str]) -> dict[str, Any]:
        return {setting: (value in _TRUE) != invert}

    return convert


def _count(name: str, setting: str) -> Callable[[str, Mapping[str, str]], dict[str, Any]]:
    def convert(value: str, given: Mapping[str, str]) -> dict[str, Any]:
        return {setting: _number(name, value)}

    return convert


_CONVERT: dict[str, Callable[[str, Mapping[str, str]], dict[str, Any]]] = {
    "UNLEASH_URL": _url,
    "UNLEASH_API_TOKEN": _api_token,
    "UNLEASH_PROXY_CLIENT_KEYS": _keys("UNLEASH_PROXY_CLIENT_KEYS", "proxy_client_keys"),
    "UNLEASH_PROXY_SECRETS": _secrets,
    "PORT": _port,
    "PROXY_PORT": _proxy_port,
    "PROXY_BASE_PATH": _same("proxy_base_path"),
    "UNLEASH_APP_NAME": _same("app_name"),
    "UNLEASH_INSTANCE_ID": _same("instance_id"),
    "UNLEASH_FETCH_INTERVAL": _milliseconds(
        "UNLEASH_FETCH_INTERVAL", "features_refresh_interval", 100
    ),
    "UNLEASH_METRICS_INTERVAL": _milliseconds("UNLEASH_METRICS_INTERVAL", "flush_interval", 1),
    "UNLEASH_ENVIRONMENT": _same("proxy_environment"),
    "UNLEASH_PROJECT_NAME": _same("proxy_project"),
    "UNLEASH_NAME_PREFIX": _same("proxy_name_prefix"),
    "TRUST_PROXY": _trust_proxy,
    "CLIENT_KEY_HEADER_NAME": _same("proxy_key_header"),
    "ENABLE_ALL_ENDPOINT": _flag("disable_all_endpoint", invert=True),
    "LOG_LEVEL": _log_level,
    "JSON_LOGGER": lambda value, given: {"log_format": "json"},
    "CORS_ORIGIN": _origins,
    "CORS_METHODS": _same("proxy_cors_methods"),
    "CORS_ALLOWED_HEADERS": _same("proxy_cors_allowed_headers"),
    "CORS_EXPOSED_HEADERS": _same("proxy_cors_exposed_headers"),
    "CORS_CREDENTIALS": _flag("proxy_cors_credentials"),
    "CORS_MAX_AGE": _count("CORS_MAX_AGE", "proxy_cors_max_age"),
    "CORS_OPTIONS_SUCCESS_STATUS": _count(
        "CORS_OPTIONS_SUCCESS_STATUS", "proxy_cors_preflight_status"
    ),
    "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": _keys(
        "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS", "proxy_server_keys"
    ),
}


def converted(variable: ProxyVariable) -> bool:
    """Whether ``read`` turns the variable into settings (every honoured one but those the
    upstream client reads from the environment itself)."""
    return variable.name in _CONVERT
