"""The README's promises: its two commands work (its settings table: test_settings_docs.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from service import free_port, get_json, wait_ready

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def command(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```sh\n(.+?)\n```", README)
    assert match, marker
    return match.group(1)


def test_ci_runs_the_readme_test_command() -> None:
    assert command("test-command") in (ROOT / ".ci" / "run").read_text()


@pytest.mark.process
@pytest.mark.deploy
def test_start_command_works_on_a_fresh_copy(tmp_path: Path) -> None:
    """Install into a new virtualenv from a copy of the tracked files and start, with the
    README's command as it is (only ``RELAY_PORT`` is set: a free port, not 4242). The service
    answering there is proven to be the one started: the admin key it printed once on its
    stdout opens an admin endpoint, which no other server would answer 200."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    copy = tmp_path / "checkout"
    for name in files:
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "VIRTUAL_ENV"))}
    port = free_port()
    env["RELAY_PORT"] = str(port)
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        process = subprocess.Popen(
            ["bash", "-c", command("start-command")],
            cwd=copy,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # pip installs into the new virtualenv first: minutes on a slow network
        wait_ready(url, process, timeout=600, path="/health", details=out.read_text)
        assert (copy / "data" / "relay.db").is_file()
        printed = out.read_text()
        assert "shown only now" in printed
        [admin] = re.findall(r"^\s+admin\s+(\S+)$", printed, re.MULTILINE)
        assert get_json(f"{url}/api/admin/projects/default", admin)["id"] == "default"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
