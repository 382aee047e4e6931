"""Settings: defaults < TOML file < ``RELAY_*`` environment < command-line flags.

Validated once at start-up into a frozen object; nothing else in the package reads the
environment. Each field's description is its documentation: ``relay serve --help``,
the README's settings table and ``config/*.toml`` are all checked against this model.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

DEFAULT_PORTS = {"standalone": 4242, "relay": 3063}


class Mode(enum.StrEnum):
    STANDALONE = "standalone"
    RELAY = "relay"


class LogFormat(enum.StrEnum):
    JSON = "json"
    TEXT = "text"


class SqliteSynchronous(enum.StrEnum):
    FULL = "FULL"
    NORMAL = "NORMAL"


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    """Every setting of the service. Names map to ``RELAY_<NAME>`` and ``--<name>``."""

    model_config = SettingsConfigDict(
        env_prefix="RELAY_", frozen=True, extra="forbid", validate_default=True
    )

    mode: Mode = Field(Mode.STANDALONE, description="standalone (central service) or relay (edge)")
    host: str = Field("0.0.0.0", description="Address to listen on")
    port: int | None = Field(
        None, ge=1, le=65535, description="Port to listen on (default 4242 standalone, 3063 relay)"
    )
    data_dir: Path = Field(Path("data"), description="Directory for the SQLite database/buffer")
    database_url: str | None = Field(
        None, description="Database URL (default: sqlite:///<data-dir>/relay.db)"
    )
    sqlite_synchronous: SqliteSynchronous = Field(
        SqliteSynchronous.FULL,
        description="SQLite fsync level: FULL survives power loss, NORMAL only process crashes",
    )
    init_admin_api_tokens: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Admin keys (*:*.secret) created at start when absent; comma-separated",
    )
    init_client_api_tokens: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Client keys (project:environment.secret) created at start when absent",
    )
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest accepted request body in bytes (larger: 413)"
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
    log_level: str = Field("INFO", description="Log level: DEBUG, INFO, WARNING, ERROR")
    log_format: LogFormat = Field(LogFormat.JSON, description="json (one object a line) or text")

    @field_validator("init_admin_api_tokens", "init_client_api_tokens", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return _comma_list(value)

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @model_validator(mode="after")
    def _database_scheme(self) -> Settings:
        url = self.database_url
        if url is not None and not url.startswith("sqlite:///"):
            raise ValueError(f"database_url: unsupported scheme in {url.split(':', 1)[0]!r}")
        return self

    @property
    def listen_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS[self.mode]

    @property
    def sqlite_path(self) -> Path:
        if self.database_url is not None:
            return Path(self.database_url.removeprefix("sqlite:///"))
        return self.data_dir / "relay.db"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _CONFIG_FILE.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)


# pydantic-settings builds sources from the class, so the chosen file is handed over here
# for the duration of one load_settings() call.
_CONFIG_FILE: dict[str, Path | None] = {}


class SettingsError(Exception):
    """Invalid configuration; the message is one line meant for the operator."""


def load_settings(
    overrides: dict[str, Any] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Build the settings from every source, or raise SettingsError with one clear line."""
    if config_file is not None and not config_file.is_file():
        raise SettingsError(f"config file not found: {config_file}")
    _CONFIG_FILE["path"] = config_file
    try:
        return Settings(**(overrides or {}))
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None
    except (ValueError, OSError) as exc:  # TOML syntax errors, unreadable files
        raise SettingsError(f"cannot read settings: {exc}") from None
    finally:
        _CONFIG_FILE.pop("path", None)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        name = ".".join(str(p) for p in error["loc"]) or "settings"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        parts.append(f"{name}: {message}")
    return "invalid settings: " + "; ".join(parts)
