"""The ``relay`` program run as an operator runs it: a subprocess with no ``RELAY_*``
variable but those given, and the keys the tests pin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ADMIN = "*:*.pinned-admin-secret-0123456789"
CLIENT = "default:development.pinned-client-secret-0123456789"


def relay(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "relay", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
