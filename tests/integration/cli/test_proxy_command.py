"""``relay proxy`` (issue 34): the Unleash Proxy's environment, unchanged, read into relay's
settings (every variable of the Proxy 1.4.19 honoured, said, or refused by name), and the
real program run from it: the Proxy's paths against a real standalone, with the default
workers, the browser SDKs' counts reaching the standalone through the durable buffer, and
the flags served again after a restart while the standalone is down."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flagkit import FEATURES, env_path, http
from service import Service, running, settle, start, wait_until

from relay.cli.proxy.environment import DEFAULTS, converted, read
from relay.cli.proxy.variables import VARIABLES, Kind
from relay.settings import Settings, SettingsError, load_settings

ADMIN = "*:*.proxy-command-admin-0123456789abcdef0123"
CLIENT = "default:development.proxy-command-client-0123456789abcdef"
KEY = "some-secret"
RELAY = (sys.executable, "-m", "relay")
PROXY_ENV = {
    "UNLEASH_URL": "http://unleash:4242/api/",
    "UNLEASH_API_TOKEN": CLIENT,
    "UNLEASH_PROXY_CLIENT_KEYS": f"{KEY}, another-key",
}


def settings_of(**env: str) -> dict[str, Any]:
    return read({**PROXY_ENV, **env}).overrides


def test_the_proxys_required_three_become_a_relay() -> None:
    assert settings_of() == {
        **DEFAULTS,
        "mode": "relay",
        "setting_names": "proxy",
        "upstream_url": "http://unleash:4242",
        "upstream_tokens": [CLIENT],
        "client_tokens": [CLIENT],
        "proxy_client_keys": [KEY, "another-key"],
    }


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"UNLEASH_PROXY_CLIENT_KEYS": "", "UNLEASH_PROXY_SECRETS": "a,b"},
            {"proxy_client_keys": ["a", "b"]},
        ),
        ({"UNLEASH_PROXY_SECRETS": "old"}, {"proxy_client_keys": [KEY, "another-key"]}),
        ({"PORT": "4000", "PROXY_PORT": "5000"}, {"port": 4000}),
        ({"PROXY_PORT": "5000"}, {"port": 5000}),
        ({"PROXY_BASE_PATH": "edge/"}, {"proxy_base_path": "edge/"}),
        ({"UNLEASH_APP_NAME": "web-proxy"}, {"app_name": "web-proxy"}),
        ({"UNLEASH_INSTANCE_ID": "proxy-1"}, {"instance_id": "proxy-1"}),
        ({"UNLEASH_FETCH_INTERVAL": "2500"}, {"features_refresh_interval": 2.5}),
        ({"UNLEASH_METRICS_INTERVAL": "60000ms"}, {"flush_interval": 60.0}),
        ({"UNLEASH_ENVIRONMENT": "production"}, {"proxy_environment": "production"}),
        ({"UNLEASH_PROJECT_NAME": "default"}, {"proxy_project": "default"}),
        ({"UNLEASH_NAME_PREFIX": "web."}, {"proxy_name_prefix": "web."}),
        ({"TRUST_PROXY": "false"}, {"trust_proxy": False}),
        (
            {"TRUST_PROXY": "TRUE"},
            {"trust_proxy": True, "proxy_trusted_servers": ["0.0.0.0/0", "::/0"]},
        ),
        (
            {"TRUST_PROXY": "10.0.0.0/8, loopback"},
            {
                "trust_proxy": True,
                "proxy_trusted_servers": ["10.0.0.0/8", "127.0.0.1/8", "::1/128"],
            },
        ),
        ({"CLIENT_KEY_HEADER_NAME": "X-Key"}, {"proxy_key_header": "X-Key"}),
        ({"ENABLE_ALL_ENDPOINT": "true"}, {"disable_all_endpoint": False}),
        ({"ENABLE_ALL_ENDPOINT": "yes"}, {"disable_all_endpoint": True}),  # the Proxy's reading
        ({"LOG_LEVEL": "warn"}, {"log_level": "WARNING"}),
        ({"LOG_LEVEL": "fatal"}, {"log_level": "CRITICAL"}),
        ({"JSON_LOGGER": "false"}, {"log_format": "json"}),  # any value, as the Proxy
        ({"CORS_ORIGIN": "*"}, {"frontend_cors_origins": ["*"]}),
        (
            {"CORS_ORIGIN": "http://a.com, http://b.com"},
            {"frontend_cors_origins": ["http://a.com", "http://b.com"]},
        ),
        ({"CORS_METHODS": "GET"}, {"proxy_cors_methods": "GET"}),
        (
            {"CORS_ALLOWED_HEADERS": "authorization"},
            {"proxy_cors_allowed_headers": "authorization"},
        ),
        ({"CORS_EXPOSED_HEADERS": "ETag,X-Y"}, {"proxy_cors_exposed_headers": "ETag,X-Y"}),
        ({"CORS_CREDENTIALS": "t"}, {"proxy_cors_credentials": True}),
        ({"CORS_MAX_AGE": "10"}, {"proxy_cors_max_age": 10}),
        ({"CORS_OPTIONS_SUCCESS_STATUS": "200"}, {"proxy_cors_preflight_status": 200}),
        ({"EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": "s1,s2"}, {"proxy_server_keys": ["s1", "s2"]}),
        ({"CORS_PREFLIGHT_CONTINUE": "false", "HTTP_OPTIONS_REJECT_UNAUTHORIZED": "true"}, {}),
        ({"EXP_BOOTSTRAP_AUTHORIZATION": "no url: the Proxy ignored it"}, {}),
    ],
)
def test_each_variable_as_the_proxy_read_it(env: dict[str, str], expected: dict[str, Any]) -> None:
    found = settings_of(**env)
    assert {k: found[k] for k in expected} == expected
    load = {k: v for k, v in found.items() if k != "port"} | {"data_dir": "/nowhere"}
    Settings(**load)  # and relay takes what it gives


def test_relays_own_variables_win() -> None:
    env = {**PROXY_ENV, "PORT": "4000", "RELAY_PORT": "5000", "RELAY_MODE": "standalone"}
    found = read(env).overrides
    assert "port" not in found  # RELAY_PORT is read by the settings themselves
    assert found["mode"] == "relay"  # what relay proxy is, whatever RELAY_MODE says


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"UNLEASH_URL": ""}, "You must specify the unleashUrl option (UNLEASH_URL)"),
        (
            {"UNLEASH_API_TOKEN": ""},
            "You must specify the unleashApiToken option (UNLEASH_API_TOKEN)",
        ),
        ({"UNLEASH_PROXY_CLIENT_KEYS": ""}, "(UNLEASH_PROXY_CLIENT_KEYS)"),
        ({"UNLEASH_URL": "http://unleash:4242"}, "UNLEASH_URL: must be Unleash's API URL"),
        (
            {"UNLEASH_API_TOKEN": "legacy-secret"},
            "UNLEASH_API_TOKEN: must be an Unleash client key",
        ),
        ({"UNLEASH_TAGS": "simple:web"}, "UNLEASH_TAGS: the client API"),
        (
            {"UNLEASH_CUSTOM_STRATEGIES_FILE": "/app/strategies.js"},
            "UNLEASH_CUSTOM_STRATEGIES_FILE: it is JavaScript, which relay cannot run",
        ),
        ({"EXP_CUSTOM_ENRICHERS_FILE": "/app/enrich.js"}, "EXP_CUSTOM_ENRICHERS_FILE: it is"),
        ({"CORS_PREFLIGHT_CONTINUE": "true"}, "CORS_PREFLIGHT_CONTINUE:"),
        ({"HTTP_OPTIONS_REJECT_UNAUTHORIZED": "false"}, "HTTP_OPTIONS_REJECT_UNAUTHORIZED:"),
        ({"EXP_BOOTSTRAP_URL": "http://cdn/flags.json"}, "EXP_BOOTSTRAP_URL: relay keeps"),
        ({"TRUST_PROXY": "2"}, "TRUST_PROXY: a number of hops is not supported"),
        ({"LOG_LEVEL": "loud"}, "LOG_LEVEL: must be one of"),
        ({"UNLEASH_FETCH_INTERVAL": "fast"}, "UNLEASH_FETCH_INTERVAL: must be a number"),
        ({"UNLEASH_FETCH_INTERVAL": "10"}, "UNLEASH_FETCH_INTERVAL: at least 100"),
        ({"UNLEASH_PROXY_CLIENT_KEYS": " , "}, "UNLEASH_PROXY_CLIENT_KEYS: no key in it"),
    ],
)
def test_what_cannot_be_honoured_is_refused_by_name(env: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError) as refused:
        read({**PROXY_ENV, **env})
    assert says in str(refused.value)
    assert CLIENT not in str(refused.value) and "legacy-secret" not in str(refused.value)


def test_every_variable_is_read_said_or_refused() -> None:
    """The table is every variable the Proxy 1.4.19 reads (its config.js and server.js, and
    its SDK's HTTP_PROXY): each honoured one sets a setting of relay's, or is read by relay
    itself from the environment (HTTP_PROXY, HTTPS_PROXY: the upstream client)."""
    names = {v.name for v in VARIABLES}
    assert len(names) == len(VARIABLES) == 38
    for variable in VARIABLES:
        assert set(variable.ours) <= set(Settings.model_fields), variable.name
        if variable.kind is Kind.HONOURED:
            assert converted(variable) or variable.name in ("HTTP_PROXY", "HTTPS_PROXY")
        else:
            assert variable.why, variable.name


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"UNLEASH_API_TOKEN": "[]:development.multi-project-0123456789"},
            "UNLEASH_API_TOKEN is a multi-project key",
        ),
        (
            {"UNLEASH_PROJECT_NAME": "web"},
            "UNLEASH_PROJECT_NAME (web) is not a project UNLEASH_API_TOKEN sees",
        ),
    ],
)
def test_a_scope_the_keys_cannot_see_is_refused_at_start(env: dict[str, str], says: str) -> None:
    """The proxy's keys see what UNLEASH_API_TOKEN sees: a key whose projects relay cannot
    know, or a project it does not see, would answer every request 403; said at start."""
    overrides = read({**PROXY_ENV, **env}).overrides | {"data_dir": "/nowhere"}
    with pytest.raises(SettingsError, match=re.escape(says)):
        load_settings(overrides)


def test_said_variables_are_said() -> None:
    said = read({**PROXY_ENV, "ENABLE_OAS": "true", "UNLEASH_METRICS_JITTER": "500"}).said
    assert [line.split(":")[0] for line in said] == ["UNLEASH_METRICS_JITTER", "ENABLE_OAS"]
    assert read({**PROXY_ENV, "ENABLE_OAS": "false", "UNLEASH_METRICS_JITTER": "0"}).said == ()


# --- the real program ---


def program(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    names = {v.name for v in VARIABLES}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_") and k not in names}
    return subprocess.run(
        [*RELAY, *args], env={**clean, **env}, capture_output=True, text=True, timeout=60
    )


def test_a_refusal_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**PROXY_ENV, "UNLEASH_CUSTOM_STRATEGIES_FILE": "/app/strategies.js"}
    done = program("proxy", env=env)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("relay: error: relay proxy: not supported: UNLEASH_CUSTOM_STRATEGIES")
    assert "built-in strategy and constraints" in line
    json_errors = program("proxy", env={**env, "JSON_LOGGER": "true"})
    assert json.loads(json_errors.stderr)["level"] == "error"
    bad = program("proxy", env={**PROXY_ENV, "PROXY_BASE_PATH": "a b"})
    assert bad.returncode == 2 and "PROXY_BASE_PATH (proxy_base_path):" in bad.stderr
    assert program("proxy", "--port", "1", env=PROXY_ENV).returncode == 2


ALL = "*:development.proxy-command-all-0123456789abcdef0123"


@contextmanager
def standalone(tmp_path: Path) -> Iterator[Service]:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": f"{CLIENT},{ALL}"}
    with running(tmp_path / "central", env=env, name="central") as central:
        for name in ("shown", "counted"):
            assert (
                http(
                    "POST",
                    f"{central.url}{FEATURES.format(project='default')}",
                    {"name": name},
                    ADMIN,
                )[0]
                == 201
            )
            assert http("POST", f"{central.url}{env_path(name)}/on", key=ADMIN)[0] == 200
        yield central


def proxy(workdir: Path, central: Service, **more: str) -> Service:
    """``relay proxy`` with the Proxy's variables only, and relay's default worker count."""
    env = {**PROXY_ENV, "UNLEASH_URL": f"{central.url}/api", "RELAY_WORKERS": "auto", **more}
    return start(workdir, "proxy", env=env, name="proxy", wait_for="/proxy/health", program=RELAY)


def toggles(service: Service) -> list[str]:
    status, body = http("GET", f"{service.url}/proxy?userId=1", key=KEY)
    assert status == 200, body
    return [t["name"] for t in body["toggles"]]


def test_relay_proxy_serves_counts_and_outlives_an_outage(tmp_path: Path) -> None:
    with standalone(tmp_path) as central:
        served = proxy(tmp_path / "proxy", central, UNLEASH_METRICS_INTERVAL="200")
        try:
            wait_until(lambda: http("GET", f"{served.url}/proxy", key=KEY)[0] == 200, "served")
            assert toggles(served) == ["counted", "shown"]
            assert http("GET", f"{served.url}/proxy", key="nope")[0] == 401
            now = datetime.now(UTC).isoformat()  # the standalone reads the last 48 hours
            bucket = {"start": now, "stop": now, "toggles": {"counted": {"yes": 5, "no": 0}}}
            body = {"appName": "shop-web", "instanceId": "browser", "bucket": bucket}
            for _ in range(3):
                status, _ = http("POST", f"{served.url}/proxy/client/metrics", body, key=KEY)
                assert status == 200
            settle(central, ADMIN, "counted", 15)
            said = served.logs()
            assert "proxy_paths" in said and KEY not in said and "another-key" not in said
        finally:
            served.close()
        central.stop()
        # the standalone is gone: a restarted relay proxy serves the flags it kept
        again = start(
            tmp_path / "proxy",
            "proxy",
            name="again",
            wait_for="/proxy/health",
            program=RELAY,
            env={**PROXY_ENV, "UNLEASH_URL": f"{central.url}/api"},
        )
        try:
            assert toggles(again) == ["counted", "shown"]
        finally:
            again.close()
    # the default worker count: auto (one per core), not a number set
    assert re.search(r"workers: \d+ \((?!set;)", served.logs()), served.logs()[-2000:]
