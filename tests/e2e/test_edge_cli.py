"""Unleash Edge's command line and environment on the real program (issue 24): ``relay edge``
as Edge parses it, Edge's variables, unsupported options refused by name without echoing a
value, JSON logs on every line, strict keys as Edge 20's, ``relay health`` / ``ready``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest
from edgekit import DEV, PROD, edge, flag_of, relay, standalone
from service import free_port, running

from relay.cli.edge.command_line import Serve, parse
from relay.cli.edge.options import OPTIONS, Kind
from relay.settings import Settings, load_settings

pytestmark = pytest.mark.process


def test_edge_command_line_serves_flags_from_its_upstream(tmp_path: Path) -> None:
    with (
        standalone(tmp_path) as central,
        edge(tmp_path / "relay", "edge", "-u", central.url, "-t", DEV) as served,
    ):
        assert flag_of(served.url, DEV) is True
        assert "relay listening" in served.logs()


def test_edge_environment_variables_serve_flags_from_its_upstream(tmp_path: Path) -> None:
    with standalone(tmp_path) as central:
        env = {"UPSTREAM_URL": central.url, "TOKENS": DEV, "PORT": str(free_port())}
        env |= {"INTERFACE": "127.0.0.1", "FEATURES_REFRESH_INTERVAL_SECONDS": "1"}
        with edge(tmp_path / "relay", "edge", env=env) as served:
            assert flag_of(served.url, DEV) is True


def test_several_tokens_serve_each_keys_scope(tmp_path: Path) -> None:
    with (
        standalone(tmp_path) as central,
        edge(
            tmp_path / "relay", "edge", "--upstream-url", central.url, "--tokens", f"{DEV},{PROD}"
        ) as served,
    ):
        assert flag_of(served.url, DEV) is True
        assert flag_of(served.url, PROD) is False


def test_strict_keys_refuse_a_key_outside_the_tokens_scopes(tmp_path: Path) -> None:
    """PROD is valid upstream: ``relay serve --mode relay`` serves it after asking, ``relay
    edge -t DEV`` (strict, as Edge 20) refuses it; DEV is served by both."""
    with standalone(tmp_path) as central:
        with edge(tmp_path / "strict", "edge", "-u", central.url, "-t", DEV) as strict:
            assert flag_of(strict.url, DEV) is True
            for _ in range(2):  # asked upstream, then refused from what is remembered
                with pytest.raises(urllib.error.HTTPError) as refused:
                    flag_of(strict.url, PROD)
                with refused.value:
                    body = json.loads(refused.value.read())
                assert refused.value.code == 401
                # the answer says why, in the names the operator used (Edge's TOKENS)
                assert body["message"] == (
                    "The provided API token is invalid or has expired: valid upstream, but its"
                    " environment production is outside TOKENS"
                )
            assert "environment production is outside TOKENS" in strict.logs()
            assert PROD not in strict.logs()
        relay_env = {"RELAY_UPSTREAM_URL": central.url, "RELAY_CLIENT_TOKENS": DEV}
        with running(tmp_path / "dynamic", "--mode", "relay", env=relay_env) as dynamic:
            assert flag_of(dynamic.url, PROD) is False  # served: the upstream vouched for it


def test_global_options_go_before_or_after_the_subcommand() -> None:
    for argv, name in ((["-a", "before", "edge"], "before"), (["edge", "-a", "after"], "after")):
        parsed = parse([*argv, "-u", "http://up:4242", "-t", DEV], {})
        assert isinstance(parsed, Serve)
        assert parsed.overrides["app_name"] == name
    parsed = parse(["-p", "4000", "edge", "-p", f"{PROD}", "-u", "http://up", "-t", DEV], {})
    assert isinstance(parsed, Serve)  # -p: the port before edge, pretrusted keys after it
    assert parsed.overrides["port"] == "4000" and parsed.overrides["frontend_tokens"] == [PROD]
    parsed = parse(["-w", "4", "edge", "-u", "http://up", "-t", DEV], {})
    assert isinstance(parsed, Serve) and parsed.no_effect == ("--workers",)  # as in Edge 20
    assert "workers" not in parsed.overrides


def test_relay_names_win_over_edge_names_and_edge_flags_over_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {"UPSTREAM_URL": "http://edge-env", "RELAY_UPSTREAM_URL": "http://relay-env"}
    env |= {"TOKENS": DEV, "APP_NAME": "edge-name"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    parsed = parse(["edge", "--app-name", "flag-name"], env)
    assert isinstance(parsed, Serve)
    settings = load_settings(parsed.overrides)  # RELAY_* from the environment too
    assert settings.upstream_url == "http://relay-env" and settings.app_name == "flag-name"
    assert settings.client_tokens == [DEV] and settings.upstream_tokens == [DEV]
    assert settings.strict_keys is True


def test_an_unsupported_edge_option_is_a_start_up_error_naming_it(tmp_path: Path) -> None:
    secret = "redis://user:hunter2-secret@redis:6379"
    done = relay("edge", "-u", "http://up:4242", "-t", DEV, "--redis-url", secret)
    assert done.returncode == 2
    assert "--redis-url (REDIS_URL)" in done.stderr and "not supported" in done.stderr
    done = relay("edge", env={"UPSTREAM_URL": "http://up", "TOKENS": DEV, "TLS_ENABLE": "true"})
    assert done.returncode == 2 and "--tls-enable (TLS_ENABLE)" in done.stderr
    for shown in (secret, "hunter2", DEV, DEV.split(".")[1]):
        assert shown not in done.stderr + done.stdout


def test_no_error_prints_a_key_back() -> None:
    for argv in (
        ["edge", "--tokenz", DEV],
        ["edge", "-u", "http://up", "--tokens", DEV, DEV],
        ["-p", DEV, "edge"],
        ["edge", "-u", "http://up", "-t", DEV, "-p", "secret-123@development"],
    ):
        done = relay(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert DEV.split(".")[1] not in done.stderr + done.stdout, argv
        assert "secret-123" not in done.stderr, argv


def test_relay_serve_says_which_command_reads_edges_variables() -> None:
    done = relay("serve", "--mode", "relay", env={"UPSTREAM_URL": "http://up", "TOKENS": DEV})
    assert done.returncode == 2 and "upstream_url is required" in done.stderr
    assert "UPSTREAM_URL and TOKENS: Edge's names, read by `relay edge`" in done.stderr
    assert DEV.split(".")[1] not in done.stderr


@pytest.mark.parametrize(
    ("rust_log", "level"),
    [("warn", "WARNING"), ("info,unleash_edge=debug", "INFO"), ("tower=warn,x=trace", "DEBUG")],
)
def test_rust_log_sets_the_log_level(rust_log: str, level: str) -> None:
    parsed = parse(["edge", "-u", "http://up", "-t", DEV], {"RUST_LOG": rust_log})
    assert isinstance(parsed, Serve) and parsed.overrides["log_level"] == level


def test_an_edge_default_given_to_an_unsupported_option_is_accepted() -> None:
    env = {"REDIS_MODE": "single", "TLS_ENABLE": "false", "BASE_PATH": "", "CORS_MAX_AGE": "172800"}
    assert isinstance(parse(["edge", "-u", "http://up", "-t", DEV], env), Serve)


def test_with_json_logs_every_line_is_json(tmp_path: Path) -> None:
    """Start-up, serving, shutdown, with one and with two workers, and a bad-config exit."""
    with standalone(tmp_path) as central:
        for workers in ("1", "2"):
            workdir = tmp_path / f"relay-{workers}"
            env = {"LOG_FORMAT": "json", "RELAY_WORKERS": workers}
            with edge(workdir, "edge", "-u", central.url, "-t", DEV, env=env) as served:
                assert flag_of(served.url, DEV) is True
                served.stop(signal.SIGTERM)
            lines = (served.logs() + served.stdout()).splitlines()
            assert any("listening on" in line for line in lines)
            for line in lines:
                assert isinstance(json.loads(line), dict), line
    for argv, env in (
        (["edge", "-u", "http://up"], {"LOG_FORMAT": "json"}),
        (["edge", "-u", "http://up", "-t", DEV, "--redis-url", "x"], {"LOG_FORMAT": "json"}),
        (["-l", "json", "edge", "--no-such-option"], {}),
        (["edge", "-u", "ftp://up", "-t", DEV], {"LOG_FORMAT": "json"}),
        (["serve", "--port", "0"], {"RELAY_LOG_FORMAT": "json"}),
    ):
        done = relay(*argv, env=env)
        assert done.returncode == 2, (argv, done.stderr)
        lines = (done.stderr + done.stdout).splitlines()
        assert lines, argv
        for line in lines:
            assert isinstance(json.loads(line), dict), (argv, line)


def test_with_json_logs_a_warning_and_an_uncaught_exception_are_json_lines() -> None:
    program = (
        "import warnings; from relay import logs;"
        " logs.configure('INFO', logs.LogFormat.JSON);"
        " warnings.warn('old'); raise RuntimeError('boom')"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert done.returncode == 1 and len(lines) == 2, done.stderr
    assert "old" in lines[0]["msg"] and "RuntimeError: boom" in lines[1]["exc"]


def test_offline_options_map_onto_offline_mode() -> None:
    argv = ["offline", "-b", "flags.json", "-c", DEV, "--frontend-tokens", PROD, "-r", "5"]
    parsed = parse(argv, {})
    assert isinstance(parsed, Serve)
    assert parsed.overrides == {
        "mode": "offline",
        "setting_names": "edge",  # errors in Edge's names
        "bootstrap_file": "flags.json",
        "client_tokens": [DEV],
        "frontend_tokens": [PROD],
        "reload_interval": "5",
    }
    parsed = parse(["offline"], {"BOOTSTRAP_FILE": "f.json", "CLIENT_TOKENS": f"{DEV},{PROD}"})
    assert isinstance(parsed, Serve) and parsed.overrides["client_tokens"] == [DEV, PROD]


def test_relay_offline_serves_its_bootstrap_file(tmp_path: Path) -> None:
    """Offline mode itself is i24-ops's (relay serve --mode offline); this is Edge's command
    line of it, with Edge's variables."""
    workdir = tmp_path / "offline"
    workdir.mkdir()
    (workdir / "flags.json").write_text(json.dumps({"edgeflag": {"enabled": True}}))
    env = {"BOOTSTRAP_FILE": "flags.json", "CLIENT_TOKENS": DEV, "RELOAD_INTERVAL": "1"}
    with edge(workdir, "-i", "127.0.0.1", "offline", env=env) as served:
        assert flag_of(served.url, DEV) is True
        assert relay("ready", "-e", served.url).returncode == 0


def test_health_and_ready_exit_as_edges(tmp_path: Path) -> None:
    with standalone(tmp_path) as central:
        assert relay("health", "-e", central.url).returncode == 0
        assert relay("ready", "--edge-url", central.url).returncode == 0
        assert relay("health", env={"EDGE_URL": central.url}).returncode == 0
        # a setting of the service it does not start is no reason for a check to fail
        assert relay("health", "-e", central.url, env={"TLS_ENABLE": "true"}).returncode == 0
    gone = f"http://127.0.0.1:{free_port()}"
    unready = {"RELAY_UPSTREAM_URL": gone, "RELAY_CLIENT_TOKENS": DEV}
    with running(tmp_path / "unready", "--mode", "relay", env=unready, wait_for="/health") as up:
        assert relay("health", "-e", up.url).returncode == 0
        done = relay("ready", "-e", up.url)
        assert done.returncode == 1 and "answered 503" in done.stderr
    for command in ("health", "ready"):
        done = relay(command, "-e", gone)
        assert done.returncode == 1 and "did not answer" in done.stderr


def test_every_relay_setting_in_the_table_exists() -> None:
    """The table maps Edge's options onto settings by name: each must be one of relay's."""
    named = {name for o in OPTIONS if o.kind is Kind.SETTING for name in o.ours}
    assert named - set(Settings.model_fields) == set()


def test_a_shortened_option_is_refused_as_edge_refuses_it() -> None:
    """clap takes an option only by its whole name: ``--backup`` is not ``--backup-folder``
    in Edge, so it is not in relay either (argparse would take any unambiguous prefix)."""
    for argv in (
        ["edge", "-u", "http://up", "-t", DEV, "--backup", "/tmp/backup"],
        ["edge", "--upstream", "http://up", "-t", DEV],
        ["--inter", "127.0.0.1", "edge", "-u", "http://up", "-t", DEV],
    ):
        done = relay(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        # "--inter" not known: "127.0.0.1" is taken for the subcommand, an invalid choice
        assert "unrecognized arguments" in done.stderr or "invalid choice" in done.stderr, argv


def test_health_never_prints_a_password_of_its_url() -> None:
    url = f"http://probe:hunter2-secret@127.0.0.1:{free_port()}"
    done = relay("health", "-e", url)
    assert done.returncode == 1
    assert "hunter2" not in done.stderr + done.stdout, done.stderr
    assert "127.0.0.1" in done.stderr


def test_a_value_option_given_twice_is_refused_as_edge_refuses_it() -> None:
    """clap refuses ``-u A -u B`` (argparse would keep B): the error names the option, not
    the values; a list option (``-t``) may be repeated, as in Edge."""
    done = relay("edge", "-u", "http://a", "--upstream-url", "http://b", "-t", DEV)
    assert done.returncode == 2
    assert "--upstream-url: cannot be used multiple times" in done.stderr
    assert "http://b" not in done.stderr
    parsed = parse(["edge", "-u", "http://up", "-t", DEV, "-t", PROD], {})
    assert isinstance(parsed, Serve) and parsed.overrides["client_tokens"] == [DEV, PROD]


def test_the_images_healthcheck_finds_a_relay_started_by_edges_command_line(
    tmp_path: Path,
) -> None:
    """The image's HEALTHCHECK is ``relay healthcheck``, with only the image's variables
    (RELAY_DATA_DIR): it asks the port the service listens on, whichever command line set it
    (here Edge's ``-p``; relay's default port would be standalone's 4242)."""
    workdir = tmp_path / "offline"
    workdir.mkdir()
    (workdir / "flags.json").write_text(json.dumps({"edgeflag": {"enabled": True}}))
    env = {"BOOTSTRAP_FILE": "flags.json", "CLIENT_TOKENS": DEV}
    image = {"RELAY_DATA_DIR": str(workdir / "data")}
    (workdir / "data").mkdir()  # as the image's /data (offline mode writes nothing there)
    with edge(workdir, "-i", "127.0.0.1", "offline", env=env | image):
        done = relay("healthcheck", env=image)
        assert done.returncode == 0, done.stderr
    assert relay("healthcheck", env=image).returncode == 1  # stopped: nothing answers
