"""A PostgreSQL for the tests: the machine's local cluster, a throwaway database per test.

``TEST_POSTGRES_URL`` names a server to use instead (a URL of a database the user may
``CREATE DATABASE`` from, e.g. ``postgresql://postgres:pw@127.0.0.1/postgres``). By default
the local cluster is reached over its Unix socket as a role named like the OS user; when
that fails, the cluster is started (``pg_ctlcluster``) and, as root, the role is created.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import subprocess
import uuid
from urllib.parse import parse_qs, urlsplit

import asyncpg

ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql:///postgres?host=/var/run/postgresql")
CLUSTER = ("15", "main")


def url_of(database: str) -> str:
    """ADMIN_URL with another database name."""
    parts = urlsplit(ADMIN_URL)  # not urlunsplit: it drops the // of an empty host
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme}://{parts.netloc}/{database}{query}"


def unleash_env(database: str) -> dict[str, str]:
    """The settings that point a real Unleash server (``unleash_server.js``) at
    ``database``: its own variables, from the URL of that database."""
    url = urlsplit(url_of(database))
    return {
        "UNLEASH_DB_HOST": parse_qs(url.query).get("host", [url.hostname or "127.0.0.1"])[0],
        "UNLEASH_DB_PORT": str(url.port or 5432),
        "UNLEASH_DB_USER": url.username or getpass.getuser(),
        "UNLEASH_DB_PASSWORD": url.password or "",
        "UNLEASH_DB_NAME": database,
    }


def name_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


async def _probe() -> None:
    conn = await asyncpg.connect(ADMIN_URL, timeout=5)
    await conn.close()


def _reachable() -> str | None:
    try:
        asyncio.run(_probe())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def ensure_server() -> str | None:
    """None once the server answers; else why not (for the fixture to fail or skip on)."""
    if _reachable() is None:
        return None
    if "TEST_POSTGRES_URL" not in os.environ and shutil.which("pg_ctlcluster"):
        subprocess.run(["pg_ctlcluster", *CLUSTER, "start"], capture_output=True, check=False)
        if os.geteuid() == 0 and _reachable() is not None:
            role = getpass.getuser()
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    "postgres",
                    "--",
                    "psql",
                    "-qc",
                    f'CREATE ROLE "{role}" SUPERUSER LOGIN',
                ],
                capture_output=True,
                check=False,
            )
    return _reachable()


async def admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL, timeout=10)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def create_database() -> str:
    name = f"relay_test_{uuid.uuid4().hex[:12]}"
    await admin(f'CREATE DATABASE "{name}"')
    return name


async def drop_database(name: str) -> None:
    await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
