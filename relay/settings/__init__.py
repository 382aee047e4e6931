"""Settings: defaults < TOML file < ``RELAY_*`` environment < command-line flags.

Validated once at start-up into a frozen object; nothing else in the package reads the
environment. The sources are read by ``load_settings`` alone (pydantic-settings, loaded
there): a worker gets its settings as JSON, and holds none of the loader in its memory.
Each field's description is its documentation, and its ``Usage`` what the
description does not say: ``relay serve --help`` reads them, and ``relay settings-docs``
(relay/settings_docs.py) writes the settings table (docs/settings.md), ``config/*.toml`` and the
Helm chart's ``config`` schema from them.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError, field_validator, model_validator

from relay.core.keys import InvalidKey, offline_principal, parse_key, redact
from relay.settings.database_url import POSTGRES_SCHEMES, check_database_url
from relay.settings.fields import DEFAULT_PORTS, DEFAULT_WORKERS, LOG_LEVELS
from relay.settings.proxy import ProxySettingsFields
from relay.settings.usage import Mode, named, usage
from relay.wire.common import KeyType

__all__ = ["Mode", "Settings", "SettingsError", "load_settings"]

_KEY_SETTINGS = {
    "init_admin_api_tokens": KeyType.ADMIN,
    "init_client_api_tokens": KeyType.CLIENT,
    "init_frontend_api_tokens": KeyType.FRONTEND,
    "upstream_tokens": KeyType.CLIENT,
    "client_tokens": KeyType.CLIENT,
    "frontend_tokens": KeyType.FRONTEND,
}
"""The settings that hold keys, and their type."""


class Settings(ProxySettingsFields):
    """Every setting of the service (``SettingsFields``, then ``ProxySettingsFields``),
    checked together, and what follows from them."""

    @model_validator(mode="before")
    @classmethod
    def _workers_by_mode(cls, data: Any) -> Any:
        """``workers`` not given: the mode's default (``DEFAULT_WORKERS``)."""
        if isinstance(data, dict) and data.get("workers") is None:
            try:
                mode = Mode(data.get("mode", Mode.CENTRAL))
            except ValueError:
                return data  # the mode's own error says what is wrong
            return {**data, "workers": DEFAULT_WORKERS[mode.value]}
        return data

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        if value.upper() not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return value.upper()

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.database_url is not None:
            check_database_url(self.database_url)
        self._keys_well_formed()
        if self.strict_keys and not self.client_tokens:
            raise ValueError("strict_keys needs client_tokens (the scopes keys must be within)")
        if self.proxy_client_keys or self.proxy_server_keys:
            self._proxy_scope()
        if self.trust_proxy and not self.proxy_trusted_servers:
            # trusting every peer would let any caller choose its address
            raise ValueError("trust_proxy needs proxy_trusted_servers (the proxies' IPs/CIDRs)")
        for name, field in type(self).model_fields.items():
            needs = usage(field)
            if needs.required and needs.mode is self.mode and getattr(self, name) is None:
                raise ValueError(f"{name} is required in {self.mode} mode (RELAY_{name.upper()})")
        return self

    def _keys_well_formed(self) -> None:
        """Every configured key is a key of its setting's type, checked here, once, so a
        malformed one is one line naming its setting (the secret masked) before any worker
        starts; offline mode takes any string as Edge's does."""
        for name, type in _KEY_SETTINGS.items():
            for key in getattr(self, name):
                try:
                    if self.mode is Mode.OFFLINE and type is not KeyType.ADMIN:
                        offline_principal(key, type)
                    else:
                        parse_key(key, type)
                except InvalidKey as exc:
                    raise ValueError(f"{named(name, self.setting_names)}: {exc}") from None
        if self.mode is Mode.EDGE:
            for key in self.frontend_tokens:
                if key.startswith("[]:"):
                    raise ValueError(
                        f"{named('frontend_tokens', self.setting_names)}: {redact(key)}: a"
                        " multi-project frontend key names none of its projects; leave it"
                        " out, the relay learns it upstream"
                    )

    def _proxy_scope(self) -> None:
        """The Unleash Proxy's keys see what the first client_tokens key sees: it must say
        which projects (not a multi-project key), and hold proxy_project."""
        keys = named("client_tokens", self.setting_names)
        if not self.client_tokens:
            raise ValueError(
                f"{named('proxy_client_keys', self.setting_names)} need {keys}: they see the"
                " flags of its first key"
            )
        project = self.client_tokens[0].partition(":")[0]
        if project == "[]":
            raise ValueError(
                f"{keys} is a multi-project key ([]:): the projects it sees are the"
                " upstream's to know; give a key of one project, or of all (*)"
            )
        if self.proxy_project is not None and project not in ("*", self.proxy_project):
            raise ValueError(
                f"{named('proxy_project', self.setting_names)} ({self.proxy_project}) is not a"
                f" project {keys} sees ({project})"
            )

    @property
    def listen_port(self) -> int:
        return self.port if self.port is not None else DEFAULT_PORTS[self.mode]

    @property
    def uses_postgres(self) -> bool:
        """Standalone on PostgreSQL; relay mode always buffers in SQLite under data_dir."""
        return self.database_url is not None and self.database_url.startswith(POSTGRES_SCHEMES)

    @property
    def sqlite_path(self) -> Path:
        if self.database_url is not None and not self.uses_postgres:
            return Path(self.database_url.removeprefix("sqlite:///"))
        return self.data_dir / "relay.db"

    @property
    def buffer_path(self) -> Path:
        return self.data_dir / "buffer.db"


_CONFIG_FILE: dict[str, Path | None] = {}  # sources are built per class: one load's file


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
        return _from_sources()(**(overrides or {}))
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None
    except (ValueError, OSError) as exc:  # TOML syntax errors, unreadable files
        raise SettingsError(f"cannot read settings: {exc}") from None
    finally:
        _CONFIG_FILE.pop("path", None)


@cache
def _from_sources() -> type[Settings]:
    """``Settings`` read from the TOML file, the environment and the flags given."""
    from pydantic_settings import (
        BaseSettings,
        PydanticBaseSettingsSource,
        SettingsConfigDict,
        TomlConfigSettingsSource,
    )

    class FromSources(Settings, BaseSettings):
        # a list is one comma-separated string, never JSON (``relay.settings.usage``)
        model_config = SettingsConfigDict(
            env_prefix="RELAY_",
            frozen=True,
            extra="forbid",
            validate_default=True,
            enable_decoding=False,
        )

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

    return FromSources


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        name = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        parts.append(f"{name}: {message}" if name else message)
    return "invalid settings: " + "; ".join(parts)
