"""Relay and standalone as real processes: their keys and settings, calls and counts
over HTTP, and the worker processes a supervisor runs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from service import (
    Service,
)
from service import relay_env as service_relay_env
from service import stored as stored_counts

ADMIN = "*:*.e2e-admin-secret-0123456789"
CLIENT = "default:development.e2e-client-secret-0123456789"
STANDALONE_ENV = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}


def relay_env(upstream: str, **extra: str) -> dict[str, str]:
    return service_relay_env(upstream, CLIENT, **extra)


def call(
    url: str, body: Any = None, key: str = CLIENT, method: str | None = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method or ("POST" if data else "GET"),
        headers={"Authorization": key, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        raw = response.read()
        return response.status, json.loads(raw) if raw else None


def post_metric(service: Service, yes: int, feature: str = "f1") -> None:
    body = {
        "applications": [],
        "metrics": [
            {"featureName": feature, "appName": "app", "environment": "development", "yes": yes}
        ],
    }
    assert call(f"{service.url}/api/client/metrics/bulk", body)[0] == 202


def stored(standalone: Service, feature: str = "f1") -> int:
    return stored_counts(standalone.url, ADMIN, feature)


def workers(service: Service) -> list[int]:
    """PIDs of the supervisor's server processes."""
    pid = service.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [
        int(child)
        for child in children
        if b"relay.process.server\x00worker" in Path(f"/proc/{child}/cmdline").read_bytes()
    ]
