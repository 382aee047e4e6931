"""The settings' fields: each one's default, bounds, description and ``Usage`` (what
``relay serve --help``, docs/settings.md's table, ``config/*.toml`` and the Helm schema say of it,
written by ``relay settings-docs``). How they are loaded and checked together is
``relay.settings``; the fields are apart because they are most of the text.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from relay.logs import LogFormat
from relay.settings import cores
from relay.settings.usage import CommaList, Mode, NetworkList, SettingNames, UpstreamUrl, Usage

MAX_WORKERS = 64
# "auto" or a number: the chart's schema carries it over (a pattern applies to strings only)
WORKERS_SCHEMA = {
    "type": ["integer", "string"],
    "minimum": 1,
    "maximum": MAX_WORKERS,
    "pattern": "^auto$",
}
DEFAULT_PORTS = {"standalone": 4242, "relay": 3063, "offline": 3063}
# a relay is most often a sidecar next to one service: one process, no supervisor, the least
# memory on every pod (docs/operations.md, "Workers"); a standalone serves a whole fleet
DEFAULT_WORKERS = {"standalone": "auto", "relay": 1, "offline": 1}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _workers(value: object) -> object:
    """``auto`` is decided once, here: the workers get the number in the settings' JSON."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return cores.available().workers(MAX_WORKERS)
    if isinstance(value, str) and not value.strip().isdigit():
        raise ValueError(f"must be 1 to {MAX_WORKERS}, or auto")  # -1 too: "all" elsewhere
    return value


class SqliteSynchronous(enum.StrEnum):
    FULL = "FULL"
    NORMAL = "NORMAL"


class OfflineMetrics(enum.StrEnum):
    KEEP = "keep"
    DROP = "drop"


class SettingsFields(BaseModel):
    """Every setting of the service, in the order the docs list them. Names map to
    ``RELAY_<NAME>`` and ``--<name>``."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    mode: Mode = Field(
        Mode.CENTRAL,
        description="standalone (central service), relay (edge) or offline (flags from a file)",
    )
    host: str = Field("0.0.0.0", description="Address to listen on")
    port: Annotated[int | None, Usage(example=DEFAULT_PORTS)] = Field(
        None, ge=1, le=65535, description="Port to listen on (default 4242 standalone, 3063 relay)"
    )
    workers: Annotated[
        int,
        BeforeValidator(_workers),
        WithJsonSchema(WORKERS_SCHEMA),
        Usage(example=DEFAULT_WORKERS, note="Why each mode's default: docs/operations.md"),
    ] = Field(  # type: ignore[assignment]  # set by mode when not given: Settings
        None,
        ge=1,
        le=MAX_WORKERS,
        description="Server processes sharing the port and the database: a number, or auto"
        " (one per core the process may use, cgroup CPU quota included); default 1 in relay"
        " and offline mode, auto in standalone",
    )
    data_dir: Annotated[
        Path, Usage(note="Its files: relay.db (standalone) or buffer.db and cache.db (relay)")
    ] = Field(Path("data"), description="Directory for the SQLite database/buffer")
    database_url: Annotated[
        str | None,
        Usage(
            Mode.CENTRAL,
            secret=True,
            note="Several instances may share one PostgreSQL database; ?sslmode=verify-full also"
            " checks the server's certificate",
            example="sqlite:///data/relay.db",
        ),
    ] = Field(
        None,
        description="Standalone: database URL, sqlite:///FILE or postgresql://USER:PASS@HOST/DB"
        " (TLS with ?sslmode=require; default: sqlite:///<data-dir>/relay.db)",
    )
    database_pool_size: Annotated[
        int,
        Usage(
            Mode.CENTRAL,
            note="All instances together must stay under the server's max_connections",
        ),
    ] = Field(10, ge=1, le=1000, description="PostgreSQL: most connections this instance opens")
    database_timeout: Annotated[float, Usage(Mode.CENTRAL)] = Field(
        10.0,
        gt=0,
        description="PostgreSQL: seconds to connect, to wait for a pooled connection or a query",
    )
    sqlite_synchronous: SqliteSynchronous = Field(
        SqliteSynchronous.FULL,
        description="SQLite fsync level: FULL survives power loss, NORMAL only process crashes",
    )
    init_admin_api_tokens: Annotated[
        CommaList, Usage(Mode.CENTRAL, secret=True, note="Stored hashed")
    ] = Field(
        default_factory=list,
        description="Admin keys (*:*.secret) created at start when absent; comma-separated",
    )
    init_client_api_tokens: Annotated[
        CommaList, Usage(Mode.CENTRAL, secret=True, note="Stored hashed")
    ] = Field(
        default_factory=list,
        description="Client keys (project:environment.secret) created at start when absent",
    )
    init_frontend_api_tokens: Annotated[
        CommaList, Usage(Mode.CENTRAL, note="Public by design: shipped in browser code")
    ] = Field(
        default_factory=list,
        description="Frontend keys (project:environment.secret) created at start when absent",
    )
    upstream_url: Annotated[
        UpstreamUrl | None, Usage(Mode.EDGE, required=True, example="http://unleash:4242")
    ] = Field(None, description="Relay: base URL of the central service, without /api")
    upstream_tokens: Annotated[
        CommaList,
        Usage(Mode.EDGE, secret=True, note="Each is project:environment.secret"),
    ] = Field(
        default_factory=list,
        description="Relay: client keys used to flush, one per environment; comma-separated",
    )
    client_tokens: Annotated[
        CommaList,
        Usage(
            Mode.EDGE,
            secret=True,
            note="Other keys are checked once against the upstream's /edge/validate and"
            " trusted for key_cache_ttl seconds; offline: the only client keys accepted",
            offline=True,
        ),
    ] = Field(
        default_factory=list,
        description="Relay: SDK keys accepted without asking upstream; comma-separated",
    )
    frontend_tokens: Annotated[
        CommaList,
        Usage(Mode.EDGE, note="Public by design: shipped in browser code", offline=True),
    ] = Field(
        default_factory=list,
        description="Relay: frontend keys accepted without asking upstream; comma-separated",
    )
    bootstrap_file: Annotated[
        Path | None,
        Usage(
            Mode.OFFLINE,
            required=True,
            note='A client features answer, or {"flag": {"enabled": true, "variant": "v"}};'
            " only client_tokens and frontend_tokens are accepted",
            example="features.json",
        ),
    ] = Field(None, description="Offline: the file the flags are served from")
    reload_interval: Annotated[
        float, Usage(Mode.OFFLINE, note="A file that does not read keeps the last good copy")
    ] = Field(
        0.0, ge=0, description="Offline: seconds between checks of the file for a change (0: never)"
    )
    offline_metrics: Annotated[
        OfflineMetrics,
        Usage(Mode.OFFLINE, note="keep: in buffer.db, bounded by buffer_max_bytes"),
    ] = Field(
        OfflineMetrics.DROP,
        description="Offline: SDKs' counts kept (a relay may send them) or"
        " dropped, both answered 202",
    )
    backup_folder: Annotated[
        Path | None,
        Usage(
            Mode.EDGE,
            note="Read once, while cache.db is empty; never written",
            example="/var/lib/unleash-edge/backup",
        ),
    ] = Field(
        None,
        description="Relay: an Unleash Edge backup folder (unleash_features.json,"
        " unleash_tokens.json) served from at first start",
    )
    strict_keys: Annotated[bool, Usage(Mode.EDGE, note="relay edge sets it")] = Field(
        False,
        description="Relay: refuse keys the upstream vouches for outside the scopes of"
        " client_tokens (same environment, projects among theirs), as Edge 20 does",
    )
    flush_interval: Annotated[float, Usage(Mode.EDGE)] = Field(
        10.0, gt=0, description="Relay: seconds between flushes upstream (fractions allowed)"
    )
    features_refresh_interval: Annotated[
        float,
        Usage(
            Mode.EDGE,
            note="One request per scope (keys of one projects and environment) per interval,"
            " whatever the number of SDKs",
        ),
    ] = Field(
        15.0,
        ge=0.1,
        description="Relay: seconds between revalidations of each scope's flags upstream"
        " (fractions allowed)",
    )
    final_flush_timeout: Annotated[float, Usage(Mode.EDGE)] = Field(
        10.0,
        ge=0,
        description="Relay: seconds the flush on SIGTERM may take; the rest stays on disk",
    )
    app_name: Annotated[str, Usage(Mode.EDGE)] = Field(
        "relay", min_length=1, max_length=255, description="Relay: appName in connectVia"
    )
    instance_id: Annotated[str | None, Usage(Mode.EDGE, example="relay-1")] = Field(
        None,
        min_length=1,
        max_length=255,
        description="Relay: instanceId in connectVia (default: generated once, kept in data dir)",
    )
    report_interval: Annotated[
        float,
        Usage(
            Mode.EDGE,
            note="Posted to {upstream}/api/client/metrics/edge with an upstream key; an upstream"
            " that refuses that path (open-source Unleash) is asked again hourly",
        ),
    ] = Field(60.0, gt=0, description="Relay: seconds between two reports of itself upstream")
    max_batch_bytes: Annotated[int, Usage(Mode.EDGE, note="Unleash refuses bodies over 100 kB")] = (
        Field(
            95 * 1024,
            ge=1024,
            le=1024 * 1024,
            description="Relay: largest upstream batch body in bytes (at most 1 MiB)",
        )
    )
    buffer_max_bytes: Annotated[
        int,
        Usage(
            Mode.EDGE,
            note="Counted in relay_evicted_entries_total; protects the disk while the upstream"
            " is down",
        ),
    ] = Field(
        512 * 1024 * 1024,
        ge=1024 * 1024,
        description="Relay: bound of the buffer files on disk (pages in use and WAL);"
        " past it the oldest data is evicted",
    )
    upstream_timeout: Annotated[float, Usage(Mode.EDGE)] = Field(
        10.0, gt=0, description="Relay: seconds an upstream request may take"
    )
    backoff_max: Annotated[float, Usage(Mode.EDGE)] = Field(
        300.0, gt=0, description="Relay: longest wait between retries of a failing upstream"
    )
    key_cache_ttl: Annotated[float, Usage(Mode.EDGE)] = Field(
        3600.0, gt=0, description="Relay: seconds an SDK key validated upstream is trusted"
    )
    web_session_ttl: Annotated[
        float,
        Usage(Mode.CENTRAL, note="Signing in again opens a new session; signing out ends it"),
    ] = Field(
        8 * 3600.0,
        gt=0,
        le=30 * 24 * 3600,
        description="Standalone: seconds a sign-in to the web page lasts",
    )
    web_secure_cookies: Annotated[
        bool,
        Usage(
            Mode.CENTRAL,
            note="Over TLS to the service itself the cookie is Secure anyway; set this when a"
            " proxy in front terminates TLS",
        ),
    ] = Field(False, description="Standalone: mark the web page's session cookie Secure")
    event_log_kept: Annotated[
        int, Usage(Mode.CENTRAL, note="The oldest go first; each keeps <= 32 KB before and after")
    ] = Field(
        50_000, ge=100, le=10_000_000, description="Standalone: admin changes the event log keeps"
    )
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest accepted request body in bytes (larger: 413)"
    )
    idle_timeout: float = Field(
        15.0,
        gt=0,
        description="Seconds an idle connection is kept open; also the most a client may take"
        " to send a request's headers",
    )
    body_timeout: float = Field(
        30.0, gt=0, description="Seconds a client may take to send a request body (then 408)"
    )
    write_timeout: float = Field(
        30.0, gt=0, description="Seconds a client may stop reading an answer (then it is cut off)"
    )
    stream_keepalive: float = Field(
        15.0, gt=0, le=25, description="Seconds between keep-alive comments on an idle stream"
    )
    stream_max: Annotated[int, Usage(note="Past it an SDK is hydrated and told to poll")] = Field(
        10_000, ge=0, description="Streams the service holds at most, all workers' together"
    )
    stream_max_per_key: Annotated[
        int, Usage(note="Half of stream_max: a fleet sharing one key streams, and leaves half")
    ] = Field(
        5_000, ge=0, description="Streams of one key the service holds at most (then as stream_max)"
    )
    auth_failure_limit: int = Field(
        100,
        ge=0,
        description="Invalid keys a client address may present per auth_failure_window before"
        " it gets 429 for keys not known valid (0: no limit)",
    )
    auth_failure_window: float = Field(
        60.0, gt=0, description="Seconds over which auth_failure_limit refills"
    )
    cors_origins: Annotated[
        CommaList, Usage(note="Not the frontend paths: frontend_cors_origins is theirs")
    ] = Field(
        default_factory=list,
        description="Browser origins allowed by CORS, comma-separated; empty: CORS off",
    )
    trust_proxy: bool = Field(
        False,
        description="Take the caller's address from X-Forwarded-For (or Forwarded) when the"
        " peer is one of proxy_trusted_servers",
    )
    proxy_trusted_servers: Annotated[
        NetworkList, Usage(note="Required with trust_proxy, e.g. 10.0.0.0/8 in a cluster")
    ] = Field(
        default_factory=list,
        description="Reverse proxies' IPs and CIDRs, comma-separated, whose forwarded addresses"
        " are believed",
    )
    disable_all_endpoint: bool = Field(
        False, description="No /api/frontend/all nor /api/proxy/all (Edge's --disable-all-endpoint)"
    )
    disable_metrics_endpoint: bool = Field(
        False, description="No /internal-backstage/metrics (Prometheus; Edge's name)"
    )
    disable_metrics_batch_endpoint: bool = Field(
        False, description="No /internal-backstage/metricsbatch (counts not sent yet)"
    )
    disable_features_endpoint: bool = Field(
        False, description="No /internal-backstage/features (the flags held, per scope)"
    )
    disable_tokens_endpoint: bool = Field(
        False, description="No /internal-backstage/tokens (the keys known, without secrets)"
    )
    disable_instance_data_endpoint: bool = Field(
        False, description="No /internal-backstage/instancedata (this relay's report)"
    )
    frontend_cors_origins: Annotated[
        CommaList, Usage(note="The frontend keys are public: any origin is Unleash's default")
    ] = Field(
        default_factory=lambda: ["*"],
        description="Origins allowed by CORS on /api/frontend and /api/proxy (*: any);"
        " empty: no CORS there",
    )
    setting_names: Annotated[SettingNames, Usage(note="relay edge and relay proxy set it")] = Field(
        SettingNames.RELAY,
        description="Whose setting names errors use: relay's, Unleash Edge's or the"
        " Unleash Proxy's",
    )
    idempotency_ttl: float = Field(
        24 * 3600.0, gt=0, description="Seconds an Idempotency-Key is remembered"
    )
    commit_max_requests: int = Field(
        512, ge=1, description="Most requests grouped into one database transaction"
    )
    shutdown_timeout: float = Field(
        10.0, ge=0, description="Seconds to finish in-flight requests on SIGTERM"
    )
    log_level: str = Field(
        "INFO",
        description="Log level: DEBUG, INFO, WARNING, ERROR",
        json_schema_extra={"enum": [*LOG_LEVELS, *(level.lower() for level in LOG_LEVELS)]},
    )
    log_format: LogFormat = Field(LogFormat.JSON, description="json (one object a line) or text")
    access_log: Annotated[
        bool,
        Usage(note="Probes (health, readiness, metrics) are logged at DEBUG; keys never are"),
    ] = Field(
        True,
        description="One INFO line per request: method, route template, status, duration, bytes",
    )
