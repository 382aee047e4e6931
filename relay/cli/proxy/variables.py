"""Every environment variable the Unleash Proxy reads (npm ``@unleash/proxy`` 1.4.19: its
``config.js`` and ``server.js``, and the ``HTTP_PROXY`` its SDK honours), with what relay
does with it.

One table, read by ``relay proxy`` (``relay.cli.proxy.environment``) and by the docs
(docs/proxy.md, written by ``relay settings-docs``), so that the two cannot drift. A
variable is honoured (it sets relay settings), said (accepted: one line at start says what
relay does instead), or refused (a start-up error naming it, unless its value asks for
nothing the Proxy would not do by default).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    HONOURED = "honoured"
    SAID = "said"
    REFUSED = "refused"


@dataclass(frozen=True)
class ProxyVariable:
    name: str
    kind: Kind
    ours: tuple[str, ...] = ()  # the relay settings it sets (HONOURED)
    why: str = ""  # for the docs and the start-up line: how it maps, or why it cannot
    default: str | None = None  # the Proxy's default


def _honoured(name: str, *ours: str, why: str = "", default: str | None = None) -> ProxyVariable:
    return ProxyVariable(name, Kind.HONOURED, ours, why, default)


def _refused(name: str, why: str, default: str | None = None) -> ProxyVariable:
    return ProxyVariable(name, Kind.REFUSED, (), why, default)


_JAVASCRIPT = (
    "it is JavaScript, which relay cannot run: express the rule with a built-in strategy"
    " and constraints (or a segment) in Unleash, which every SDK then evaluates alike"
)
_BOOTSTRAP = (
    "relay keeps the flags it fetched in data_dir, and serves them through outages and"
    " restarts; to serve a file with no upstream, run relay offline"
)

VARIABLES: tuple[ProxyVariable, ...] = (
    _honoured(
        "UNLEASH_URL",
        "upstream_url",
        why="Unleash's API URL, ending in /api (relay calls"
        " {url}/client/...: the /api is taken off for relay's upstream_url)",
    ),
    _honoured(
        "UNLEASH_API_TOKEN",
        "upstream_tokens",
        "client_tokens",
        why="a client key in Unleash's form: it fetches the flags and sends the counts",
    ),
    _honoured(
        "UNLEASH_PROXY_CLIENT_KEYS",
        "proxy_client_keys",
        why="any strings, comma-separated; the browser SDKs send one in CLIENT_KEY_HEADER_NAME",
    ),
    _honoured(
        "UNLEASH_PROXY_SECRETS",
        "proxy_client_keys",
        why="the older name: read when UNLEASH_PROXY_CLIENT_KEYS is not set",
    ),
    _honoured("PORT", "port", default="3000"),
    _honoured("PROXY_PORT", "port", why="read when PORT is not set", default="3000"),
    _honoured("PROXY_BASE_PATH", "proxy_base_path", why="paths under {base}/proxy", default=""),
    _honoured(
        "UNLEASH_APP_NAME",
        "app_name",
        default="unleash-proxy",
        why="relay's name upstream, and the appName of a context that gives none",
    ),
    _honoured(
        "UNLEASH_INSTANCE_ID",
        "instance_id",
        why="relay's default is generated once and kept in data_dir",
    ),
    _honoured(
        "UNLEASH_FETCH_INTERVAL",
        "features_refresh_interval",
        default="5000",
        why="milliseconds; relay also follows an upstream's stream when it offers one",
    ),
    _honoured(
        "UNLEASH_METRICS_INTERVAL",
        "flush_interval",
        default="30000",
        why="milliseconds; relay's default is 10 s",
    ),
    ProxyVariable(
        "UNLEASH_METRICS_JITTER",
        Kind.SAID,
        default="0",
        why="relay flushes on each instance's own clock, from its start: instances do not"
        " send at once",
    ),
    _honoured(
        "UNLEASH_ENVIRONMENT",
        "proxy_environment",
        why="the environment of every context, whatever the caller says",
    ),
    _honoured("UNLEASH_PROJECT_NAME", "proxy_project", why="the one project served"),
    _honoured("UNLEASH_NAME_PREFIX", "proxy_name_prefix", why="only flags so named are served"),
    _refused(
        "UNLEASH_TAGS",
        "the client API relay's copy comes from carries no tags: narrow by project"
        " (UNLEASH_PROJECT_NAME, or a key of one project) or by name (UNLEASH_NAME_PREFIX)",
    ),
    _refused("UNLEASH_CUSTOM_STRATEGIES_FILE", _JAVASCRIPT),
    _refused(
        "EXP_CUSTOM_ENRICHERS_FILE",
        "it is JavaScript, which relay cannot run: have the SDK send the field in its context"
        " (properties), which constraints then read",
    ),
    _honoured(
        "TRUST_PROXY",
        "trust_proxy",
        "proxy_trusted_servers",
        default="false",
        why="true trusts every peer's X-Forwarded-For (the left-most address is the caller's);"
        " addresses, CIDRs, loopback, linklocal or uniquelocal trust those; a hop count is"
        " refused",
    ),
    _honoured(
        "CLIENT_KEY_HEADER_NAME",
        "proxy_key_header",
        default="authorization",
    ),
    ProxyVariable(
        "ENABLE_OAS",
        Kind.SAID,
        default="false",
        why="relay serves its OpenAPI document at /docs/openapi.json and Redoc at /docs, always",
    ),
    _honoured(
        "ENABLE_ALL_ENDPOINT",
        "disable_all_endpoint",
        default="false",
        why="without it /proxy/all answers 501 (and relay serves no /api/frontend/all)",
    ),
    _honoured(
        "LOG_LEVEL",
        "log_level",
        default="warn",
        why="debug, info, warn, error, fatal; relay's default is info",
    ),
    _honoured(
        "JSON_LOGGER",
        "log_format",
        why="any value: JSON lines; relay's default is JSON lines too (RELAY_LOG_FORMAT=text"
        " for text)",
    ),
    _honoured(
        "CORS_ORIGIN",
        "frontend_cors_origins",
        default="*",
        why="comma-separated; /api/frontend's too",
    ),
    _honoured("CORS_METHODS", "proxy_cors_methods", default="GET, POST"),
    _honoured("CORS_ALLOWED_HEADERS", "proxy_cors_allowed_headers", why="unset: those asked for"),
    _honoured("CORS_EXPOSED_HEADERS", "proxy_cors_exposed_headers", default="ETag"),
    _honoured("CORS_CREDENTIALS", "proxy_cors_credentials", default="false"),
    _honoured("CORS_MAX_AGE", "proxy_cors_max_age", default="172800"),
    _refused(
        "CORS_PREFLIGHT_CONTINUE",
        "relay answers every preflight of /proxy itself, as the Proxy did by default",
        default="false",
    ),
    _honoured("CORS_OPTIONS_SUCCESS_STATUS", "proxy_cors_preflight_status", default="204"),
    _refused(
        "HTTP_OPTIONS_REJECT_UNAUTHORIZED",
        "relay always checks the upstream's certificate: trust a private CA with"
        " SSL_CERT_FILE or SSL_CERT_DIR",
        default="true",
    ),
    ProxyVariable(
        "HTTP_PROXY",
        Kind.HONOURED,
        why="relay's calls upstream go through it, as the Proxy's did (NO_PROXY too)",
    ),
    ProxyVariable(
        "HTTPS_PROXY",
        Kind.HONOURED,
        why="relay's calls upstream go through it, as the Proxy's did (NO_PROXY too)",
    ),
    _refused("EXP_BOOTSTRAP_URL", _BOOTSTRAP),
    _refused(
        "EXP_BOOTSTRAP_AUTHORIZATION",
        "read with EXP_BOOTSTRAP_URL only (alone it is taken and ignored, as by the Proxy):"
        f" {_BOOTSTRAP}",
    ),
    _honoured(
        "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS",
        "proxy_server_keys",
        why="they read /proxy/client/features (with segments), and may send counts",
    ),
)
"""In the order of the Proxy's README."""

BY_NAME = {variable.name: variable for variable in VARIABLES}
