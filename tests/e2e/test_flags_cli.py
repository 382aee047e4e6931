"""``relay flags create|on|off|list|export|import``: real processes on the store a running
service uses."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from clikit import ADMIN, CLIENT, relay
from flagkit import http
from service import running


def features(url: str) -> dict[str, bool]:
    request = urllib.request.Request(
        f"{url}/api/client/features", headers={"Authorization": CLIENT}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return {f["name"]: f["enabled"] for f in json.load(response)["features"]}


def test_flags_commands_change_what_a_running_service_serves(tmp_path: Path) -> None:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    with running(tmp_path, env=env) as service:
        created = relay("flags", "create", "checkout", "--description", "New", cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        assert created.stdout == "created checkout in project default, off everywhere\n"
        turned = relay("flags", "on", "checkout", cwd=tmp_path)
        assert turned.returncode == 0
        assert turned.stdout.startswith("checkout is on in development (project default)")
        deadline = time.monotonic() + 30
        while features(service.url).get("checkout") is not True:
            assert time.monotonic() < deadline, "the service never saw the flag turned on"
            time.sleep(0.1)
        listed = relay("flags", "list", cwd=tmp_path)
        assert listed.stdout.splitlines() == [
            "checkout\tdefault\trelease\tdevelopment=on production=off"
        ]
        off = relay("flags", "off", "checkout", "--environment", "development", cwd=tmp_path)
        assert off.returncode == 0
        while features(service.url)["checkout"] is not False:
            assert time.monotonic() < deadline, "the service never saw the flag turned off"
            time.sleep(0.1)
    for args, message in [
        (("create", "checkout"), "A flag with that name already exists"),
        (("create", "bad name"), "/name"),
        (("on", "nothing"), "Feature nothing does not exist"),
        (("on", "checkout", "--environment", "nope"), "Could not find environment nope"),
        (("list", "--project", "nope"), "No project found"),
    ]:
        result = relay("flags", *args, cwd=tmp_path)
        assert result.returncode == 2, args
        assert result.stderr.startswith("relay: error:") and message in result.stderr, args
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_flags_evaluate_prints_the_result_and_its_reason(tmp_path: Path) -> None:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN}
    with running(tmp_path, env=env) as service:
        assert relay("flags", "create", "checkout", cwd=tmp_path).returncode == 0
        users = {"contextName": "userId", "operator": "IN", "values": ["7"]}
        plan = {"contextName": "plan", "operator": "IN", "values": ["pro"]}
        variant = {
            "name": "blue",
            "weight": 1000,
            "weightType": "variable",
            "stickiness": "default",
            "payload": {"type": "string", "value": "#00f"},
        }
        strategy = {"name": "default", "constraints": [users, plan], "variants": [variant]}
        place = f"{service.url}/api/admin/projects/default/features/checkout/environments"
        assert http("POST", f"{place}/development/strategies", strategy, ADMIN)[0] == 200
        assert http("POST", f"{place}/development/on", {}, ADMIN)[0] == 200

    def evaluate(*args: str) -> dict[str, Any]:
        done = relay("flags", "evaluate", "checkout", *args, cwd=tmp_path)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert len(done.stdout.splitlines()) == 1
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    assert evaluate("--context", "userId=7", "plan=pro") == {
        "name": "checkout",
        "project": "default",
        "enabled": True,
        "variant": {
            "name": "blue",
            "enabled": True,
            "payload": {"type": "string", "value": "#00f"},
            "feature_enabled": True,
            "featureEnabled": True,
        },
        "reason": "strategy 1 default matched",
    }
    missed = evaluate("--context", "userId=7", "--context", "plan=free")
    assert missed["enabled"] is False and missed["variant"]["name"] == "disabled"
    assert missed["reason"] == "constraint 2 on plan (IN) failed in strategy 1 default"
    assert evaluate("--environment", "production")["reason"] == "disabled in this environment"
    for args, message in [
        (("nothing",), "Feature nothing does not exist"),
        (("checkout", "--environment", "nope"), "Could not find environment nope"),
        (("checkout", "--context", "userId"), "Context entry 1 is not key=value"),
        (("checkout", "--context", "userId=1", "userId=2"), "userId is given twice"),
        (("checkout", "--context", "environment=x"), "The environment is chosen apart"),
        (("checkout", "--context", "userId=" + "x" * 5000), "at most 4096 characters"),
    ]:
        result = relay("flags", "evaluate", *args, cwd=tmp_path)
        assert result.returncode == 2 and result.stdout == "", args
        assert result.stderr.startswith("relay: error:") and message in result.stderr, args
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("command", "default"),
    [
        ("list", "the project (default: default)"),
        ("create", "the project (default: default)"),
        ("export", "the project (default: default)"),
        ("import", "the project (default: default)"),
        ("on", "the flag's project (default: the flag's own)"),
        ("off", "the flag's project (default: the flag's own)"),
    ],
)
def test_project_help_says_each_commands_own_default(
    tmp_path: Path, command: str, default: str
) -> None:
    """``list``, ``create``, ``export`` and ``import`` act on project ``default`` when none is
    given; only ``on``/``off`` look the flag up in whichever project holds it."""
    out = " ".join(relay("flags", command, "--help", cwd=tmp_path).stdout.split())
    assert f"--project PROJECT {default} " in out


def test_the_commands_export_and_import_a_file(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    for where in (source, target):
        where.mkdir()
    assert relay("flags", "create", "checkout", cwd=source).returncode == 0
    assert relay("flags", "on", "checkout", cwd=source).returncode == 0
    exported = relay("flags", "export", "--project", "default", cwd=source)
    assert exported.returncode == 0, exported.stderr
    file = tmp_path / "flags.json"
    file.write_text(exported.stdout)
    loaded = relay("flags", "import", "--environment", "development", str(file), cwd=target)
    assert (loaded.returncode, loaded.stdout.strip()) == (
        0,
        "imported 1 flags into default/development",
    ), loaded.stderr
    again = json.loads(relay("flags", "export", cwd=target).stdout)
    first = json.loads(exported.stdout)
    for strategy in [*again["featureStrategies"], *first["featureStrategies"]]:
        strategy.pop("id")
    assert again == first and first["featureEnvironments"][0]["enabled"] is True
    listed = relay("flags", "list", cwd=target).stdout
    assert listed.splitlines() == ["checkout\tdefault\trelease\tdevelopment=on production=off"]
    missing = relay("flags", "import", str(tmp_path / "nothing.json"), cwd=target)
    assert missing.returncode != 0 and "cannot read" in missing.stderr, missing.stderr
    file.write_text('{"features": [{"name": "bad name"}], "featureStrategies": []}')
    refused = relay("flags", "import", str(file), cwd=target)
    assert refused.returncode != 0 and "/features/0/name" in refused.stderr, refused.stderr
