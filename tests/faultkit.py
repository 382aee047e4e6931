"""Faults for real processes: a tmpfs to fill and remount, the bodies that fill it, the
keys and settings of the relays under load, and the check that a load saw no 500."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from load import Load
from service import relay_env as service_relay_env

ADMIN = "*:*.faults-admin-secret-0123456789"
CLIENT = "default:development.faults-client-secret-0123456789"
CENTRAL_ENV = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}


def relay_env(upstream: str, **extra: str) -> dict[str, str]:
    return service_relay_env(upstream, CLIENT, RELAY_CLIENT_TOKENS=CLIENT, **extra)


def check_clean(load: Load) -> None:
    assert load.accepted > 0
    assert not load.bad_bodies, load.bad_bodies  # every error had the JSON error body
    assert set(load.statuses) <= {0, 202, 503}, load.statuses  # never a 500


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def entries(batch: int, count: int = 500) -> list[dict[str, Any]]:
    return [
        {
            "featureName": "disk",
            "appName": f"app-{batch:04d}-{i:04d}-{'x' * 40}",
            "environment": "development",
            "yes": 1,
        }
        for i in range(count)
    ]
