"""A relay's flag cache as its tests read it: a GET with a key, and the scopes stored in
``cache.db``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from conftest import DEV_KEY

from relay.edge.flags.store import FlagScope

OTHER_DEV_KEY = "default:development.another-dev-secret-0123456789"
SPEC = {"Unleash-Client-Spec": "5.2.0"}


async def get(
    relay: Any, path: str = "/api/client/features", key: str = DEV_KEY, **headers: str
) -> tuple[int, Any, Any]:
    """(status, JSON body or None, headers) of one SDK request."""
    response = await relay.get(path, headers={"Authorization": key, **SPEC, **headers})
    raw = await response.read()
    return response.status, json.loads(raw) if raw else None, response.headers


def stored_scopes(data_dir: Path) -> list[FlagScope]:
    """The scopes of the copies in a relay's file."""
    with sqlite3.connect(data_dir / "cache.db") as conn:
        rows = conn.execute("SELECT scope FROM flag_scopes WHERE body IS NOT NULL").fetchall()
    return [FlagScope.from_id(scope) for (scope,) in rows]
