"""Settings precedence and validation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO

from relay.settings import Mode, Settings, SettingsError, load_settings

CONFIG = REPO / "config"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RELAY_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.mode is Mode.CENTRAL
    assert settings.listen_port == 4242
    assert settings.sqlite_path == Path("data/relay.db")


def test_file_then_environment_then_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "relay.toml"
    config.write_text('port = 1111\nhost = "127.0.0.2"\nlog_level = "debug"\n')
    assert load_settings(config_file=config).port == 1111
    monkeypatch.setenv("RELAY_PORT", "2222")
    settings = load_settings(config_file=config)
    assert (settings.port, settings.host, settings.log_level) == (2222, "127.0.0.2", "DEBUG")
    assert load_settings({"port": "3333"}, config_file=config).port == 3333


def test_comma_separated_keys_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "RELAY_INIT_CLIENT_API_TOKENS", "a:development.secret-1, b:production.secret-2,"
    )
    settings = load_settings()
    assert settings.init_client_api_tokens == ["a:development.secret-1", "b:production.secret-2"]


def test_database_url_selects_the_sqlite_file() -> None:
    assert load_settings({"database_url": "sqlite:///tmp/x.db"}).sqlite_path == Path("tmp/x.db")
    with pytest.raises(SettingsError, match="unsupported scheme"):
        load_settings({"database_url": "mysql://x"})


@pytest.mark.parametrize(
    "url", ["postgresql://u:p@db:5432/relay?sslmode=require", "postgres://db/relay"]
)
def test_database_url_selects_postgresql(url: str) -> None:
    settings = load_settings(
        {"database_url": url, "database_pool_size": "4", "database_timeout": "2.5"}
    )
    assert settings.uses_postgres
    assert (settings.database_pool_size, settings.database_timeout) == (4, 2.5)
    assert not load_settings({"database_url": "sqlite:///x.db"}).uses_postgres
    with pytest.raises(SettingsError, match="database_pool_size"):
        load_settings({"database_url": url, "database_pool_size": 0})


def test_unknown_keys_in_file_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "relay.toml"
    config.write_text("prot = 1\n")
    with pytest.raises(SettingsError, match="prot: unknown setting"):
        load_settings(config_file=config)


def test_bad_toml_is_one_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "relay.toml"
    config.write_text("port = \n")
    with pytest.raises(SettingsError, match="cannot read settings"):
        load_settings(config_file=config)


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIG.glob("*.toml")))
def test_config_examples_load_and_cover_every_setting(name: str) -> None:
    path = CONFIG / name
    settings = load_settings(config_file=path)
    assert settings.mode == path.stem
    text = path.read_text()
    for field in Settings.model_fields:
        assert f"{field} =" in text, f"{name} does not document {field}"


def test_upstream_url_refuses_credentials() -> None:
    relay = {"mode": "relay", "upstream_tokens": ["default:development.secret123"]}
    with pytest.raises(SettingsError, match="upstream_url: must not contain user:password"):
        load_settings({**relay, "upstream_url": "https://relay:s3cret@unleash.example.com/x"})
    with pytest.raises(SettingsError, match="upstream_url: must be an http"):
        load_settings({**relay, "upstream_url": "ftp://unleash.example.com"})
    settings = load_settings({**relay, "upstream_url": "https://unleash.example.com/a@b/"})
    assert settings.upstream_url == "https://unleash.example.com/a@b"
