"""A real Unleash server for the opt-in tests (``TEST_UNLEASH_SERVER=1``): npm
``unleash-server`` 8.2.0 (installed once into ``tests/.unleash``) run by
``unleash_server.js`` on a throwaway database of the local PostgreSQL. Installing it takes
minutes and 200 MB, and it starts in about half a minute, too much for every run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pg
import pytest
from conftest import ADMIN_KEY, DEV_KEY
from sdks import HERE, node_modules
from service import Service, start

UNLEASH = {"unleash-server": "8.2.0"}


def unleash_env(database: str) -> dict[str, str]:
    return {
        **pg.unleash_env(database),
        "INIT_ADMIN_API_TOKENS": ADMIN_KEY,
        "INIT_CLIENT_API_TOKENS": DEV_KEY,
    }


@contextmanager
def real_unleash(
    request: pytest.FixtureRequest, workdir: Path
) -> Iterator[Callable[[int | None], Service]]:
    """Starts a real Unleash (on a port, or a free one) with the admin and client keys of
    conftest.py, on one database for the whole block, dropped after it; the caller closes
    what it started. Skipped unless ``TEST_UNLEASH_SERVER=1``."""
    if os.environ.get("TEST_UNLEASH_SERVER") != "1":
        pytest.skip("a real Unleash server runs with TEST_UNLEASH_SERVER=1")
    modules = node_modules(UNLEASH, HERE / ".unleash")
    if isinstance(modules, str):
        pytest.fail(modules)
    request.getfixturevalue("postgres_server")
    database = asyncio.run(pg.create_database())
    env = {**unleash_env(database), "NODE_PATH": str(modules)}
    program = ("node", str(HERE / "unleash_server.js"))

    def run(port: int | None = None) -> Service:
        return start(
            workdir, env=env, port=port, name="unleash", wait_for="/health", program=program
        )

    try:
        yield run
    finally:
        asyncio.run(pg.drop_database(database))
