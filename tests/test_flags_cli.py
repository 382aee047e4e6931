"""``relay flags create|on|off|list``: real processes on the store a running service uses."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from service import running
from test_cli import ADMIN, CLIENT, relay


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
        assert (created.returncode, created.stdout.strip()) == (0, "checkout"), created.stderr
        assert relay("flags", "on", "checkout", cwd=tmp_path).returncode == 0
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
