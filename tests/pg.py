"""A PostgreSQL for the tests: the machine's local cluster, a throwaway database per test,
or (``Reused``) one migrated database per test process, emptied between its tests.

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
from typing import Any
from urllib.parse import parse_qs, urlsplit

import asyncpg

from relay.store.postgres import PostgresDatabase
from relay.store.sql import CENTRAL_SCHEMA

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


SEED = "test_seed"
"""The schema of a reused database holding its tables' rows as the migrations left them."""


class Reused:
    """One migrated database for the tests of one process, given back to each as the
    migrations left it. A fresh database and its migrations cost PostgreSQL 0.25 s of CPU
    and the test 0.4 s; emptying the tables costs 0.02 s. The rows the migrations wrote
    (the default project, environments, revisions) are copied to ``SEED`` once and put
    back; sequences are set back to where they were. Connections a test left open are
    ended first, as ``DROP DATABASE ... WITH (FORCE)`` would. If the schema is not the one
    seeded (a test that changed it and is not marked ``schema``), or emptying fails, the
    database is dropped and a new one made."""

    def __init__(self) -> None:
        self.name: str | None = None
        self._reset = ""
        self._shape: list[tuple[str, str, str]] = []

    async def take(self) -> str:
        """The URL of the database, empty but for what its migrations wrote."""
        if self.name is not None:
            try:
                await self._empty(self.name)
                return url_of(self.name)
            except (asyncpg.PostgresError, OSError, SchemaChanged):
                await self.drop()
        self.name = await create_database()
        migrated = PostgresDatabase(url_of(self.name), CENTRAL_SCHEMA)
        await migrated.open()
        await migrated.close()
        self._reset = await _seed(url_of(self.name))
        conn = await asyncpg.connect(url_of(self.name), timeout=10)
        try:
            self._shape = await _shape(conn)
        finally:
            await conn.close()
        return url_of(self.name)

    async def drop(self) -> None:
        name, self.name = self.name, None
        if name is not None:
            await drop_database(name)

    async def _empty(self, name: str) -> None:
        """Raises ``SchemaChanged`` when the tables or their columns are not those seeded
        (a table or a column a test added would otherwise go on to the next test)."""
        conn = await asyncpg.connect(ADMIN_URL, timeout=10)
        try:
            others = "datname = $1 AND pid <> pg_backend_pid()"
            await conn.execute(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {others}", name
            )
            for _ in range(200):  # ended, not only asked to end: up to 10 s
                if not await conn.fetchval(
                    f"SELECT count(*) FROM pg_stat_activity WHERE {others}", name
                ):
                    break
                await asyncio.sleep(0.05)
        finally:
            await conn.close()
        conn = await asyncpg.connect(url_of(name), timeout=10)
        try:
            if await _shape(conn) != self._shape:
                raise SchemaChanged(name)
            await conn.execute(self._reset)  # one statement list: one transaction
        finally:
            await conn.close()


class SchemaChanged(Exception):
    """The reused database's tables are not those it was seeded with."""


async def _shape(conn: asyncpg.Connection[Any]) -> list[tuple[str, str, str]]:
    """Every table's columns and types, every index, trigger and sequence of ``public``."""
    rows = await conn.fetch(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'public'"
        " UNION ALL SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
        " UNION ALL SELECT 'trigger', tgname, tgrelid::regclass::text FROM pg_trigger"
        " WHERE NOT tgisinternal"
        " UNION ALL SELECT 'sequence', sequencename, '' FROM pg_sequences"
        " WHERE schemaname = 'public' ORDER BY 1, 2, 3"
    )
    return [(row[0], row[1], row[2]) for row in rows]


async def _seed(url: str) -> str:
    """Copies each table's rows into ``SEED``; the SQL that empties the tables and puts
    those rows and the sequences back. Tables in the order they were made, which a foreign
    key's table follows; emptied in the reverse order (DELETE: TRUNCATE makes new files,
    six times the cost on tables this small)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        tables = [
            row[0]
            for row in await conn.fetch(
                "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
                " AND relkind = 'r' AND relname <> 'schema_migrations' ORDER BY oid"
            )
        ]
        await conn.execute(f"CREATE SCHEMA {SEED}")
        seeded = []
        for table in tables:
            await conn.execute(f'CREATE TABLE {SEED}."{table}" AS TABLE public."{table}"')
            if await conn.fetchval(f'SELECT EXISTS (SELECT 1 FROM {SEED}."{table}")'):
                seeded.append(table)
        sequences = [
            (row[0], *await conn.fetchrow(f'SELECT last_value, is_called FROM public."{row[0]}"'))
            for row in await conn.fetch(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
            )
        ]
    finally:
        await conn.close()
    return "".join(
        [f'DELETE FROM public."{table}";\n' for table in reversed(tables)]
        + [
            f'INSERT INTO public."{table}" OVERRIDING SYSTEM VALUE'
            f' SELECT * FROM {SEED}."{table}";\n'
            for table in seeded
        ]
        + [
            f"SELECT setval('public.\"{name}\"', {value}, {called});\n"
            for name, value, called in sequences
        ]
    )
