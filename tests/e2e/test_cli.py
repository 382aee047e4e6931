"""The ``relay`` program as an operator meets it: real processes, real files."""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path

import pytest
from clikit import ADMIN, CLIENT, relay
from service import free_port, post_bulk, running, start, wait_until

pytestmark = pytest.mark.process  # every test runs the relay program


def test_help_documents_every_setting(tmp_path: Path) -> None:
    from relay.settings import Settings

    out = relay("serve", "--help", cwd=tmp_path).stdout
    for name in Settings.model_fields:
        assert f"--{name.replace('_', '-')}" in out
        assert f"RELAY_{name.upper()}" in out.replace("\n", "").replace(" ", "")
    top = relay("--help", cwd=tmp_path)
    assert top.returncode == 0 and "serve" in top.stdout
    assert "settings-docs" not in top.stdout  # a developer's command


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--port", "abc"], {}, "port"),
        (["--mode", "sideways"], {}, "mode"),
        ([], {"RELAY_PORT": "70000"}, "port"),
        (["--config", "missing.toml"], {}, "config file not found"),
        ([], {"RELAY_INIT_CLIENT_API_TOKENS": "not-a-key"}, "project:environment.secret"),
        ([], {"RELAY_INIT_ADMIN_API_TOKENS": "default:development.abcdefgh1"}, "*:*.secret"),
    ],
)
def test_invalid_settings_stop_with_one_clear_line(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    result = relay("serve", *args, cwd=tmp_path, env={"RELAY_PORT": str(free_port()), **env})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("relay: error:") and expected in lines[0]
    assert "Traceback" not in result.stderr


RELAY_MODE = {"RELAY_MODE": "relay", "RELAY_UPSTREAM_URL": "http://127.0.0.1:9"}
SECRET = "hunter2-secret-0123456789"


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["serve"], {**RELAY_MODE, "RELAY_CLIENT_TOKENS": SECRET}, "client_tokens"),
        (["serve"], {**RELAY_MODE, "RELAY_UPSTREAM_TOKENS": f"a:{SECRET}"}, "upstream_tokens"),
        (["serve"], {**RELAY_MODE, "RELAY_FRONTEND_TOKENS": f"[]:dev.{SECRET}"}, "frontend"),
        (["edge", "-u", "http://127.0.0.1:9", "-t", SECRET], {}, "TOKENS"),
    ],
)
def test_a_malformed_key_is_one_line_naming_its_setting_at_any_workers(
    tmp_path: Path, args: list[str], env: dict[str, str], named: str, workers: str
) -> None:
    """Before: a JSON traceback per worker (uncaught InvalidKey), then exit 1."""
    port = ["--port", str(free_port())] if args[0] == "serve" else ["-p", str(free_port())]
    env = {**env, "RELAY_WORKERS": workers}
    result = relay(*(port + args if args[0] != "serve" else args + port), cwd=tmp_path, env=env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("relay: error:") and named in lines[0], lines[0]
    assert SECRET not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_unwritable_data_dir_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = relay(
        "serve", "--data-dir", str(blocker / "sub"), "--port", str(free_port()), cwd=tmp_path
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_first_start_prints_keys_once_and_stores_only_hashes(tmp_path: Path) -> None:
    with running(tmp_path) as service:
        out = service.stdout()
        keys = re.findall(r"^\s+(admin|client)\s+(\S+)$", out, re.MULTILINE)
        assert [k[0] for k in keys] == ["admin", "client"]
        secrets = {kind: key for kind, key in keys}
        assert secrets["admin"].startswith("*:*.")
        assert secrets["client"].startswith("default:development.")
        # and where to go with them: the URL the service answers at
        assert f"The web page: http://127.0.0.1:{service.port}/ (sign in" in out
        metrics = [{"featureName": "f", "appName": "a", "environment": "development", "yes": 1}]
        assert post_bulk(service.url, secrets["client"], metrics)[0] == 202
        logs = service.logs()
    database = (tmp_path / "data" / "relay.db").read_bytes()
    for secret in secrets.values():
        assert secret.encode() not in database
        assert secret.split(".", 1)[1] not in logs
    with running(tmp_path) as again:
        # stdout is appended across both runs: the banner is there from the first only
        assert again.stdout().count("shown only now") == 1


def test_pinned_keys_are_created_idempotently_and_never_logged(tmp_path: Path) -> None:
    env = {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
        "RELAY_LOG_LEVEL": "DEBUG",
    }
    for _ in range(2):
        with running(tmp_path, env=env) as service:
            assert post_bulk(service.url, CLIENT, [])[0] == 202
            assert "shown only now" not in service.stdout()
    logs = (tmp_path / "relay.log").read_text()
    assert "default:development.****" in logs
    assert "pinned-client-secret" not in logs and "pinned-admin-secret" not in logs
    assert b"pinned" not in (tmp_path / "data" / "relay.db").read_bytes()


def test_keys_create_command(tmp_path: Path) -> None:
    created = relay(
        "keys", "create", "--type", "client", "--environment", "production", cwd=tmp_path
    )
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip()
    assert secret.startswith("*:production.")
    # what was done, on stderr (stdout is the key alone, for KEY=$(relay keys create ...))
    assert created.stderr.startswith("created a client key of production, projects * (id ")
    assert secret not in created.stderr
    with running(tmp_path, env={"RELAY_INIT_ADMIN_API_TOKENS": ADMIN}) as service:
        assert post_bulk(service.url, secret, [])[0] == 202
    bad = relay("keys", "create", "--type", "client", "--environment", "nope", cwd=tmp_path)
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_restart_keeps_counts(tmp_path: Path) -> None:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    metrics = [{"featureName": "f", "appName": "a", "environment": "development", "yes": 2}]
    with running(tmp_path, env=env) as service:
        assert post_bulk(service.url, CLIENT, metrics)[0] == 202
        service.stop(signal.SIGKILL)
    with running(tmp_path, env=env) as service:
        assert post_bulk(service.url, CLIENT, metrics)[0] == 202
        request = urllib.request.Request(
            f"{service.url}/api/admin/client-metrics/features/f/raw",
            headers={"Authorization": ADMIN},
        )
        with urllib.request.urlopen(request) as response:
            data = json.load(response)["data"]
    assert [row["yes"] for row in data] == [4]


def test_sigterm_exits_cleanly(tmp_path: Path) -> None:
    service = start(tmp_path)
    assert service.stop() == 0


def test_healthcheck_command(tmp_path: Path) -> None:
    port = free_port()
    assert relay("healthcheck", "--port", str(port), cwd=tmp_path).returncode == 1
    with running(tmp_path, port=port):
        assert relay("healthcheck", "--port", str(port), cwd=tmp_path).returncode == 0


def test_healthcheck_finds_the_instances_of_its_data_dir_and_no_other(tmp_path: Path) -> None:
    """Run where no instance started (another directory), the check says so and fails,
    whatever answers on the default port, rather than report a server it does not know.
    Two instances in one data directory each note their own port (neither overwrites the
    other's): the check finds both, then the one still running when the other stops, and
    passes over a note left by one killed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lost = relay("healthcheck", cwd=elsewhere)
    assert lost.returncode == 1
    assert "no instance is running from data dir data" in lost.stderr
    flags = tmp_path / "flags.json"
    flags.write_text(json.dumps({"f": {"enabled": True}}))
    shared = {
        "RELAY_MODE": "offline",
        "RELAY_BOOTSTRAP_FILE": str(flags),
        "RELAY_CLIENT_TOKENS": CLIENT,
        "RELAY_DATA_DIR": str(tmp_path / "data"),
    }
    with running(tmp_path, env=shared, name="first") as first:
        second = start(tmp_path, env={**shared, "RELAY_WORKERS": "2"}, name="second")
        try:  # its worker 0 notes the port once listening: worker 1 may have answered first
            wait_until(lambda: len(list((tmp_path / "data").glob("listening.*"))) == 2, "notes")
            found = relay("healthcheck", cwd=tmp_path)
            assert found.returncode == 0, found.stderr
            ports = {int(p) for p in re.findall(r"port (\d+)", found.stdout)}
            assert ports == {first.port, second.port}, found.stdout
        finally:
            assert second.stop() == 0
        found = relay("healthcheck", cwd=tmp_path)
        assert found.returncode == 0 and f"port {first.port}" in found.stdout
        assert f"port {second.port}" not in found.stdout
        first.stop(signal.SIGKILL)
        assert len(list((tmp_path / "data").glob("listening.*"))) == 1  # left by the killed
        gone = relay("healthcheck", cwd=tmp_path)
        assert gone.returncode == 1 and "no instance is running" in gone.stderr


def test_instances_sharing_a_data_dir_keep_their_own_metrics_files(tmp_path: Path) -> None:
    """Without /dev/shm the workers' Prometheus files go under the data dir: each supervisor
    gets a directory of its own (a second instance no longer empties the first's), and one
    a killed supervisor left is deleted."""
    from relay.process import supervisor

    memory = supervisor.MEMORY
    supervisor.MEMORY = tmp_path / "no-shm"
    try:
        first = supervisor.metrics_files(tmp_path)
        (first / "counter_1.db").write_bytes(b"x")
        stale = tmp_path / "prometheus" / f"{supervisor.METRICS_PREFIX}999999999-x"
        stale.mkdir()
        second = supervisor.metrics_files(tmp_path)
    finally:
        supervisor.MEMORY = memory
    assert first != second and first.parent == second.parent == tmp_path / "prometheus"
    assert (first / "counter_1.db").is_file()
    assert not stale.exists()


def _help(*argv: str, capsys: pytest.CaptureFixture[str]) -> str:
    from relay.cli import main

    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_help_is_short_with_defaults_booleans_as_flags_supported_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    serve = _help("serve", capsys=capsys)
    assert serve.splitlines()[0].startswith("usage: relay serve [--config FILE] [--SETTING")
    assert "--trust-proxy, --no-trust-proxy" in serve and "VALUE]" not in serve.split("\n")[0]
    assert "[RELAY_PORT]" in serve and "[RELAY_HOST, default 0.0.0.0]" in serve
    groups = [line for line in serve.splitlines() if line and not line.startswith(" ")]
    assert groups[-4:] == [
        "settings of every mode:",
        "standalone mode:",
        "relay mode (offline mode reads client_tokens, frontend_tokens):",
        "offline mode:",
    ]
    edge = _help("edge", capsys=capsys)
    assert edge.index("--upstream-url") < edge.index("--tokens") < edge.index("--redis-url")
    assert edge.index("does not support") < edge.index("--redis-url")
    assert len(edge.splitlines()[0]) < 80
    created = " ".join(_help("keys", "create", capsys=capsys).split())
    assert "the key's type (default: client)" in created
    assert "required for client and frontend keys" in created
    switched = " ".join(_help("flags", "on", capsys=capsys).split())
    assert "the environment (default: development)" in switched
