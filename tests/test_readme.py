"""The README's promises: its two commands work (its settings table: test_settings_docs.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


def command(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```sh\n(.+?)\n```", README)
    assert match, marker
    return match.group(1)


def test_ci_runs_the_readme_test_command() -> None:
    assert command("test-command") in (ROOT / ".ci" / "run").read_text()


def test_start_command_works_on_a_fresh_copy(tmp_path: Path) -> None:
    """Install into a new virtualenv from a copy of the tracked files, start, answer /health."""
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
    with (tmp_path / "out.txt").open("w") as out:
        process = subprocess.Popen(
            ["bash", "-c", command("start-command")],
            cwd=copy,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert process.poll() is None, (tmp_path / "out.txt").read_text()
            try:
                with urllib.request.urlopen("http://127.0.0.1:4242/health", timeout=1) as r:
                    assert r.status == 200
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError("service did not answer on port 4242")
        assert (copy / "data" / "relay.db").is_file()
        assert "shown only now" in (tmp_path / "out.txt").read_text()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
