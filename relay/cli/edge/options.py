"""Every option of Unleash Edge's command line (open-source release 20.4.1,
``crates/oss/unleash-edge-cli/src/lib.rs``), with what relay does with it.

One table, read by the parser (``relay.cli.edge.command_line``) and by the docs
(``docs/edge.md``, written by ``relay settings-docs``), so the two cannot drift. Each option is
also an environment variable, Edge's field name in capitals (clap's ``env``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    SETTING = "setting"  # sets the relay settings in ``ours``
    CHECK = "check"  # an option of ``relay health`` / ``relay ready``
    NO_EFFECT = "no effect"  # accepted, as Edge 20 accepts it, and said at start
    UNSUPPORTED = "unsupported"  # a start-up error, unless given Edge's default
    NOT_READ = "not read"  # hidden, Edge-internal: neither the flag nor the variable is read


class Takes(enum.Enum):
    VALUE = "value"
    LIST = "list"  # comma-separated, or the option repeated
    FLAG = "flag"  # no value on the command line; true/false in the environment


TOP = "top"  # before the subcommand only (clap: not global)
GLOBAL = "global"  # before or after the subcommand
EDGE, OFFLINE, CHECKS = ("edge",), ("offline",), ("health", "ready")
COMMANDS = ("edge", "offline", "health", "ready")


@dataclass(frozen=True)
class EdgeOption:
    name: str  # Edge's field name: --name-with-dashes, NAME_IN_CAPITALS
    where: str | tuple[str, ...]  # TOP, GLOBAL, or the subcommands that take it
    kind: Kind
    ours: tuple[str, ...] = ()  # relay settings it sets (Kind.SETTING)
    why: str = ""  # for the docs: how it maps, or why there is no equivalent
    short: str | None = None
    takes: Takes = Takes.VALUE
    default: str | None = None  # Edge's default: an unsupported option given it is harmless
    env: str | None = None  # when not the name in capitals
    flagless: bool = False  # an environment variable only (RUST_LOG)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def variable(self) -> str:
        return self.env or self.name.upper()


def _setting(name: str, where: str | tuple[str, ...], *ours: str, **more: object) -> EdgeOption:
    return EdgeOption(name, where, Kind.SETTING, ours, **more)  # type: ignore[arg-type]


def _unsupported(name: str, where: str | tuple[str, ...], why: str, **more: object) -> EdgeOption:
    return EdgeOption(name, where, Kind.UNSUPPORTED, why=why, **more)  # type: ignore[arg-type]


def _not_read(name: str, where: str | tuple[str, ...], why: str, **more: object) -> EdgeOption:
    return EdgeOption(name, where, Kind.NOT_READ, why=why, **more)  # type: ignore[arg-type]


_TLS = "terminate TLS in front of relay (an ingress, a proxy, a service mesh)"
_CORS = "relay answers CORS with fixed lists: any header, the methods of the route"
_IP_FILTER = "filter addresses in front of relay (a NetworkPolicy, the proxy, a firewall)"
_AUTH_HEADER = "relay reads and sends keys in Authorization, as Unleash and its SDKs do"
_PERSIST = (
    "relay keeps flags and keys in its own SQLite cache under data_dir (durable across"
    " restarts); Edge's backup folder is read at first start (BACKUP_FOLDER)"
)
_UPSTREAM_TLS = (
    "relay's upstream client trusts the system's CA store (OpenSSL's SSL_CERT_FILE and"
    " SSL_CERT_DIR); no client certificate, no skipped verification"
)
_TELEMETRY = "relay exposes Prometheus metrics (/internal-backstage/metrics) and JSON logs"
_PROMETHEUS_PUSH = "relay is scraped: /internal-backstage/metrics; no remote write"
_HMAC = "relay does not ask Unleash to issue keys: give them in TOKENS"
_OFFLINE_KEYS = (
    "any strings, as Edge: one in Unleash's form sees its project, any other every flag of the file"
)

OPTIONS: tuple[EdgeOption, ...] = (
    # --- before the subcommand (HttpServerArgs, TlsOptions, CliArgs) ---
    _setting("port", TOP, "port", short="p", default="3063"),
    _setting("interface", TOP, "host", short="i", default="::"),
    _setting(
        "edge_keepalive_timeout",
        TOP,
        "idle_timeout",
        default="5",
        why="seconds an idle connection to relay is kept",
    ),
    _unsupported(
        "edge_request_timeout",
        TOP,
        "relay bounds each phase of a request: idle_timeout, body_timeout, write_timeout",
        default="5",
    ),
    _unsupported("tls_enable", TOP, _TLS, takes=Takes.FLAG),
    _unsupported("tls_server_key", TOP, _TLS),
    _unsupported("tls_server_cert", TOP, _TLS),
    _unsupported("tls_server_port", TOP, _TLS, default="3043"),
    _unsupported("redirect_http_to_https", TOP, _TLS, takes=Takes.FLAG),
    _not_read("hosting_type", TOP, "Edge-internal (its hosted offering)", env="EDGE_HOSTING"),
    # --- anywhere (clap's global = true) ---
    _unsupported(
        "base_path",
        GLOBAL,
        "relay serves at the root: strip the prefix in the proxy",
        default="",
    ),
    _setting(
        "cors_origin",
        GLOBAL,
        "cors_origins",
        "frontend_cors_origins",
        takes=Takes.LIST,
        why="both: Edge's CORS covers every path",
    ),
    _unsupported("cors_allowed_headers", GLOBAL, _CORS, takes=Takes.LIST),
    _unsupported("cors_max_age", GLOBAL, _CORS, default="172800"),
    _unsupported("cors_exposed_headers", GLOBAL, _CORS, takes=Takes.LIST),
    _unsupported("cors_methods", GLOBAL, _CORS, takes=Takes.LIST),
    _unsupported("allow_list", GLOBAL, _IP_FILTER, takes=Takes.LIST),
    _unsupported("deny_list", GLOBAL, _IP_FILTER, takes=Takes.LIST),
    EdgeOption(
        "workers",
        GLOBAL,
        Kind.NO_EFFECT,
        short="w",
        why="deprecated in Edge 20.0.0, which ignores it; relay's own is RELAY_WORKERS",
    ),
    _setting(
        "instance_id",
        GLOBAL,
        "instance_id",
        why="Edge's default is new at each start; relay's is kept in data_dir",
    ),
    _setting("app_name", GLOBAL, "app_name", short="a", default="unleash-edge"),
    _setting(
        "trust_proxy",
        GLOBAL,
        "trust_proxy",
        takes=Takes.FLAG,
        why="relay needs proxy_trusted_servers with it",
    ),
    _setting("proxy_trusted_servers", GLOBAL, "proxy_trusted_servers", takes=Takes.LIST),
    _setting("disable_all_endpoint", GLOBAL, "disable_all_endpoint", takes=Takes.FLAG),
    _setting(
        "log_format",
        GLOBAL,
        "log_format",
        short="l",
        default="plain",
        why="plain and pretty are relay's text; relay's default is json",
    ),
    _unsupported("edge_auth_header", GLOBAL, _AUTH_HEADER),
    _unsupported("upstream_auth_header", GLOBAL, _AUTH_HEADER),
    _unsupported("token_header", GLOBAL, _AUTH_HEADER),
    _setting(
        "disable_metrics_batch_endpoint",
        GLOBAL,
        "disable_metrics_batch_endpoint",
        takes=Takes.FLAG,
    ),
    _setting("disable_metrics_endpoint", GLOBAL, "disable_metrics_endpoint", takes=Takes.FLAG),
    _setting("disable_features_endpoint", GLOBAL, "disable_features_endpoint", takes=Takes.FLAG),
    _setting("disable_tokens_endpoint", GLOBAL, "disable_tokens_endpoint", takes=Takes.FLAG),
    _setting(
        "disable_instance_data_endpoint",
        GLOBAL,
        "disable_instance_data_endpoint",
        takes=Takes.FLAG,
    ),
    _unsupported("sentry_dsn", GLOBAL, _TELEMETRY),
    _unsupported("sentry_tracing_rate", GLOBAL, _TELEMETRY, default="0.1"),
    _unsupported("sentry_debug", GLOBAL, _TELEMETRY, takes=Takes.FLAG),
    _unsupported("sentry_enable_logs", GLOBAL, _TELEMETRY, takes=Takes.FLAG),
    _unsupported("datadog_url", GLOBAL, _TELEMETRY),
    _unsupported("otel_exporter_otlp_endpoint", GLOBAL, _TELEMETRY),
    _unsupported("otel_exporter_otlp_protocol", GLOBAL, _TELEMETRY, default="grpc"),
    _not_read("client_id", GLOBAL, "hidden: a Prometheus label of Edge's"),
    _setting(
        "rust_log",
        GLOBAL,
        "log_level",
        flagless=True,
        why="Edge's log filter (tracing's RUST_LOG, set by Edge's Helm chart): its level, or"
        " with per-module directives the most verbose of them; trace is DEBUG, off CRITICAL",
    ),
    _not_read("markdown_help", GLOBAL, "hidden: writes Edge's CLI.md", takes=Takes.FLAG),
    # --- relay edge (EdgeArgs) ---
    _setting("upstream_url", EDGE, "upstream_url", short="u"),
    _setting(
        "backup_folder",
        EDGE,
        "backup_folder",
        short="b",
        why="read at first start, before the upstream answers",
    ),
    _setting(
        "metrics_interval_seconds",
        EDGE,
        "flush_interval",
        short="m",
        default="60",
        why="relay's default is 10",
    ),
    _setting(
        "features_refresh_interval_seconds",
        EDGE,
        "features_refresh_interval",
        short="f",
        default="15",
    ),
    _setting(
        "token_revalidation_interval_seconds",
        EDGE,
        "key_cache_ttl",
        default="3600",
        why="seconds a key the upstream vouched for is trusted before it is asked again",
    ),
    _setting(
        "tokens",
        EDGE,
        "upstream_tokens",
        "client_tokens",
        short="t",
        takes=Takes.LIST,
        why="the keys that fetch flags, flush counts and bound the keys served (relay edge sets"
        " strict_keys: Edge 20 is always strict)",
    ),
    _setting(
        "pretrusted_tokens",
        EDGE,
        "frontend_tokens",
        short="p",
        takes=Takes.LIST,
        why="keys in Unleash's format only; the secret@environment form is refused",
    ),
    _unsupported(
        "custom_client_headers",
        EDGE,
        "relay sends only Authorization (and its name) upstream; a proxy can add headers",
        short="H",
        takes=Takes.LIST,
    ),
    _unsupported("skip_ssl_verification", EDGE, _UPSTREAM_TLS, short="s", takes=Takes.FLAG),
    _unsupported("pkcs8_client_certificate_file", EDGE, _UPSTREAM_TLS),
    _unsupported("pkcs8_client_key_file", EDGE, _UPSTREAM_TLS),
    _unsupported("pkcs12_identity_file", EDGE, _UPSTREAM_TLS),
    _unsupported("pkcs12_passphrase", EDGE, _UPSTREAM_TLS),
    _unsupported("pem_cert_file", EDGE, _UPSTREAM_TLS),
    _unsupported("upstream_certificate_file", EDGE, _UPSTREAM_TLS),
    _setting(
        "upstream_request_timeout",
        EDGE,
        "upstream_timeout",
        default="5",
        why="relay's default is 10",
    ),
    _unsupported(
        "upstream_socket_timeout", EDGE, "upstream_timeout bounds the whole request", default="5"
    ),
    _unsupported("redis_url", EDGE, _PERSIST, takes=Takes.LIST),
    _unsupported("redis_mode", EDGE, _PERSIST, default="single"),
    _unsupported("redis_password", EDGE, _PERSIST),
    _unsupported("redis_username", EDGE, _PERSIST),
    _unsupported("redis_port", EDGE, _PERSIST),
    _unsupported("redis_host", EDGE, _PERSIST),
    _unsupported("redis_secure", EDGE, _PERSIST, takes=Takes.FLAG),
    _unsupported("redis_scheme", EDGE, _PERSIST, default="redis"),
    _unsupported("redis_read_connection_timeout_milliseconds", EDGE, _PERSIST, default="2000"),
    _unsupported("redis_write_connection_timeout_milliseconds", EDGE, _PERSIST, default="2000"),
    _unsupported("s3_bucket_name", EDGE, _PERSIST),
    _unsupported("s3_force_path_style", EDGE, _PERSIST, takes=Takes.FLAG),
    _unsupported(
        "consumption",
        EDGE,
        "hidden and experimental in Edge; relay counts requests in its Prometheus metrics",
        takes=Takes.FLAG,
    ),
    _unsupported(
        "client_keepalive_timeout",
        EDGE,
        "relay's upstream connections use aiohttp's keep-alive",
        default="15",
    ),
    _unsupported("prometheus_remote_write_url", EDGE, _PROMETHEUS_PUSH),
    _unsupported("prometheus_push_interval", EDGE, _PROMETHEUS_PUSH, default="60"),
    _unsupported("prometheus_username", EDGE, _PROMETHEUS_PUSH),
    _unsupported("prometheus_password", EDGE, _PROMETHEUS_PUSH),
    _unsupported("prometheus_user_id", EDGE, _PROMETHEUS_PUSH),
    _not_read("hostname", EDGE, "hidden: Edge's own report (HOSTNAME is set in most containers)"),
    _not_read("ec2_instance_id", EDGE, "hidden: Edge's own report"),
    _unsupported("unleash_client_secret", EDGE, _HMAC),
    _unsupported("desired_environments", EDGE, _HMAC, takes=Takes.LIST),
    _unsupported("desired_projects", EDGE, _HMAC, takes=Takes.LIST, default="*"),
    # --- relay offline (OfflineArgs) ---
    _setting("bootstrap_file", OFFLINE, "bootstrap_file", short="b"),
    _setting(
        "client_tokens", OFFLINE, "client_tokens", short="c", takes=Takes.LIST, why=_OFFLINE_KEYS
    ),
    _setting(
        "frontend_tokens",
        OFFLINE,
        "frontend_tokens",
        short="f",
        takes=Takes.LIST,
        why=_OFFLINE_KEYS,
    ),
    _setting(
        "reload_interval",
        OFFLINE,
        "reload_interval",
        short="r",
        default="0",
        why="0: never reloaded",
    ),
    # --- relay health, relay ready (HealthCheckArgs, ReadyCheckArgs) ---
    EdgeOption(
        "edge_url",
        CHECKS,
        Kind.CHECK,
        short="e",
        default="http://localhost:3063",
        why="asks {url}/internal-backstage/health (or /ready)",
    ),
    EdgeOption(
        "ca_certificate_file",
        CHECKS,
        Kind.CHECK,
        short="c",
        why="trusted to check the instance's TLS certificate",
    ),
)
"""Edge's ``--streaming`` and ``--delta`` are in its enterprise build only, not in this one."""


def of_command(command: str) -> tuple[EdgeOption, ...]:
    """The options ``relay <command>`` takes after the subcommand (global ones included)."""
    return tuple(o for o in OPTIONS if o.where == GLOBAL or _takes(o.where, command))


def _takes(where: str | tuple[str, ...], command: str) -> bool:
    return isinstance(where, tuple) and command in where
