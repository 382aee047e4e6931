"""The flags the real SDKs read over the delta protocol: the keys, the flags made, and a
flag turned on or off."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import ADMIN_KEY, DEV_KEY
from flagkit import FEATURES, env_path, http
from service import Service, running

KEYS = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}


@contextlib.contextmanager
def with_flags(tmp_path: Path, **settings: str) -> Iterator[Service]:
    """A standalone with checkout (on) and search (off) in development."""
    with running(tmp_path / "standalone", env={**KEYS, **settings}, name="standalone") as service:
        for name in ("checkout", "search"):
            path = FEATURES.format(project="default")
            assert http("POST", f"{service.url}{path}", {"name": name})[0] == 201
        assert http("POST", f"{service.url}{env_path('checkout')}/on")[0] == 200
        yield service


def turn(url: str, name: str, on: bool) -> float:
    """Turns a flag on or off through the admin API; when it was asked. Not when the answer
    came: a stream may carry the change to the SDK before the admin's answer is read."""
    asked = time.monotonic()
    status, body = http("POST", f"{url}{env_path(name)}/{'on' if on else 'off'}")
    assert status == 200, body
    return asked
