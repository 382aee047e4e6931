"""Fixtures: a real app on a real socket (aiohttp's test server) over a real database.

Standalone apps (``client``, ``make_client``) run once on a SQLite file and once on a
PostgreSQL database (``backend``; one per test process, emptied between tests: see
``pg.Reused``), so both stores pass the same tests. Without a
reachable PostgreSQL the postgres runs are skipped, except under CI=true, where they fail.
"""

from __future__ import annotations

import asyncio
import compileall
import gc
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pg
import pytest
from aiohttp.test_utils import TestClient
from chromium import browser  # noqa: F401  (the fixture of the browser tests)
from fake_upstream import FakeUpstream
from service import raw_path
from yarl import URL

import relay
from relay.api.shared import Shared, layout
from relay.app import build_app, initialise
from relay.settings import Settings, cores, load_settings

REPO = Path(__file__).parent.parent
"""The repository's root, wherever a test module sits below tests/."""
DATA = Path(__file__).parent / "data"
"""Fixed files the tests read (answers written by a real Unleash...)."""

ADMIN_KEY = "*:*.admin-secret-for-tests-0123456789"
DEV_KEY = "default:development.dev-secret-for-tests-0123456789"
PROD_KEY = "default:production.prod-secret-for-tests-0123456789"

BULK = "/api/client/metrics/bulk"

SLOW_TIERS = ("process", "deploy")  # markers (pyproject.toml)

AppClient = TestClient  # type: ignore[type-arg]
MakeClient = Callable[..., Awaitable[Any]]


def standalone_settings(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "init_admin_api_tokens": [ADMIN_KEY],
        "init_client_api_tokens": [DEV_KEY, PROD_KEY],
        "sqlite_synchronous": "NORMAL",
        "workers": 1,  # not auto: the wiring would act as one of several workers
    }
    values.update(overrides)
    return load_settings(values)


def relay_settings(data_dir: Path, upstream_url: str, **overrides: Any) -> Settings:
    """A relay flushing every 50 ms with short backoffs, accepting the test keys locally."""
    values: dict[str, Any] = {
        "mode": "relay",
        "data_dir": data_dir,
        "upstream_url": upstream_url,
        "upstream_tokens": [DEV_KEY, PROD_KEY],
        "client_tokens": [DEV_KEY, PROD_KEY],
        "flush_interval": 0.05,
        "backoff_max": 0.5,
        "upstream_timeout": 2,
        "instance_id": "relay-under-test",
        "sqlite_synchronous": "NORMAL",
        "workers": 1,  # make_relay starts one app per worker
    }
    values.update(overrides)
    return load_settings(values)


def pytest_configure(config: pytest.Config) -> None:
    """Once, in the process that starts the run (not in each xdist worker): relay's modules
    compiled to bytecode, as an install from a wheel leaves them. The suite starts the
    program's interpreters about 500 times; with an editable install and
    ``PYTHONDONTWRITEBYTECODE`` set, as on this machine kind, each compiled every module it
    imports again (measured: 0.1 s of CPU more a one-worker start, 0.3 s a two-worker one).
    Bytecode is written from here on, in the xdist workers and the programs they start
    (they inherit the environment): pytest never writes its rewritten test modules and
    plugins (schemathesis: 360 modules) otherwise, and a test process's collection takes
    12.7 s of CPU in every run rather than 8.2 s in every run after the first."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(Path(relay.__file__).parent, quiet=1)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two test processes per core the run may use, counted as the relay
    counts its workers' (affinity and cgroup quota: a container of 2 CPUs on a large host
    starts 4, not one per host core). Most tests wait on subprocesses, sockets and timers
    rather than compute (measured on 2 cores: 105 of the slowest relay tests took 203 s at
    2 processes, 129 s at 4, 174 s at 8)."""
    return 2 * cores.available().workers(os.cpu_count() or 1)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (every test item, schemathesis' cases, hypothesis' strategies)
    lives until the run ends: frozen, the collector's full passes no longer walk it. Those
    passes took a tenth of a test process's time (measured: 13.7 s of 147 s in-process
    tests; 9.5 s frozen, with a smaller heap than the whole suite's). Collected first, so
    no garbage is frozen with it."""
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tiers first, those marked both ``process`` and ``deploy`` (pip installs) first
    of all: spread over parallel workers, the longest tests then start at once instead of
    ending the run alone."""
    items.sort(key=lambda item: -sum(bool(item.get_closest_marker(m)) for m in SLOW_TIERS))


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    fake = FakeUpstream({DEV_KEY: "development", PROD_KEY: "production"})
    await fake.start()
    yield fake
    await fake.close()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``workers`` run against a relay of one worker and of two
    (``make_relay``)."""
    if "relay_workers" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "workers"
    ):
        metafunc.parametrize("relay_workers", [1, 2], ids=["1-worker", "2-workers"])


@pytest.fixture
def relay_workers() -> int:
    """The workers ``make_relay`` starts (1 unless the test is marked ``workers``)."""
    return 1


class Workers:
    """A relay of several workers, each an app on its own socket sharing the relay's files
    and memory (``relay.api.shared``), as ``relay serve`` runs them: each request goes to
    the next worker in turn, so consecutive requests always meet another worker (the
    kernel's ``SO_REUSEPORT`` spreads connections less evenly, never more). ``app`` and
    ``server`` are the leader's."""

    def __init__(self, clients: list[AppClient]) -> None:
        self.clients = clients
        self._next = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.clients[0], name)

    def _client(self) -> AppClient:
        client = self.clients[self._next % len(self.clients)]
        self._next += 1
        return client

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._client().request(method, path, **kwargs)

    def get(self, path: str, **kwargs: Any) -> Any:
        return self._client().get(path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self._client().post(path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> Any:
        return self._client().put(path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> Any:
        return self._client().patch(path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self._client().delete(path, **kwargs)

    def head(self, path: str, **kwargs: Any) -> Any:
        return self._client().head(path, **kwargs)

    def options(self, path: str, **kwargs: Any) -> Any:
        return self._client().options(path, **kwargs)

    async def close(self) -> None:
        for client in reversed(self.clients):  # the leader last, as the supervisor stops them
            await client.close()


@pytest.fixture
def make_relay(
    aiohttp_client: Any, tmp_path: Path, upstream: FakeUpstream, relay_workers: int
) -> MakeClient:
    """Start a relay (real sockets, real SQLite files) in front of the fake upstream: one
    app, or one per worker (``relay_workers``, or ``workers`` among the settings) sharing
    the relay's files and memory, requests going to each in turn (``Workers``)."""

    async def make(data_dir: Path | None = None, **overrides: Any) -> Any:
        url = str(upstream.server.make_url("")).rstrip("/") if upstream.server else ""
        overrides.setdefault("workers", relay_workers)
        settings = relay_settings(data_dir or tmp_path / "relay", url, **overrides)
        if settings.workers == 1:
            return await aiohttp_client(build_app(settings))
        await initialise(settings)  # as relay serve does before its workers start
        shared = Shared.private(layout(settings))
        workers = [shared.as_worker(n) for n in range(settings.workers)]
        return Workers([await aiohttp_client(build_app(settings, w)) for w in workers])

    return make


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The admin URL of a reachable PostgreSQL (started if need be; see tests/pg.py)."""
    problem = pg.ensure_server()
    if problem is not None:
        message = f"PostgreSQL unreachable at {pg.ADMIN_URL}: {problem}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return pg.ADMIN_URL


@pytest.fixture
async def postgres_url(postgres_server: str) -> AsyncIterator[str]:
    """A fresh database on that server, dropped after the test."""
    name = await pg.create_database()
    yield pg.url_of(name)
    await pg.drop_database(name)


@pytest.fixture(scope="session")
def reused_postgres(postgres_server: str) -> Iterator[pg.Reused]:
    """This test process's migrated database (``pg.Reused``), dropped at the end."""
    reused = pg.Reused()
    yield reused
    asyncio.run(reused.drop())


@pytest.fixture(scope="session")
def node_sdk() -> Path:
    """node_modules with the Node SDK and the client specification, installed once from
    npm into tests/.node; skipped when npm cannot get them, except under CI=true."""
    import sdks  # the SDK helpers import UnleashClient: only for the tests that use them

    found = sdks.node_modules()
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(found)
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def app_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example application chart (helm/examples/app-with-sidecar) with its file://
    dependency resolved, in a copy of helm/, once per test module (tests/deploy.py)."""
    import deploy  # Helm's Go library: only for the tests that render charts

    return deploy.resolved_app_chart(tmp_path_factory.mktemp("helm"))


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def reused_postgres_url(reused_postgres: pg.Reused) -> str:
    """That database, holding only the rows its migrations wrote."""
    return await reused_postgres.take()


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """None (SQLite under the data dir) or a PostgreSQL database's URL: the reused one
    (``pg.Reused``), or a new, empty one for a test marked ``schema``."""
    if backend == "sqlite":
        return None
    marked = request.node.get_closest_marker("schema") is not None
    url: str = request.getfixturevalue("postgres_url" if marked else "reused_postgres_url")
    return url


@pytest.fixture
def make_client(database_url: str | None, aiohttp_client: Any, tmp_path: Path) -> MakeClient:
    """Start a standalone app on ``tmp_path`` (or another data dir) with test keys pinned, on
    the ``backend`` under test; apps made in one test share its database."""

    async def make(data_dir: Path | None = None, **overrides: Any) -> Any:
        if database_url is not None:
            overrides.setdefault("database_url", database_url)
        settings = standalone_settings(data_dir or tmp_path / "data", **overrides)
        return await aiohttp_client(build_app(settings))

    return make


@pytest.fixture
async def client(make_client: MakeClient) -> Any:
    return await make_client()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": key}


def metric(
    feature: str = "f1", app: str = "app", env: str = "development", **counts: Any
) -> dict[str, Any]:
    return {"featureName": feature, "appName": app, "environment": env, **counts}


def registration(started: datetime | None = None) -> dict[str, Any]:
    """The registration of the Python SDK's instance ``shop-1`` of app ``shop``, started
    ``started`` (now by default)."""
    return {
        "appName": "shop",
        "instanceId": "shop-1",
        "sdkVersion": "unleash-client-python:6.9.1",
        "strategies": ["default"],
        "started": (started or datetime.now(UTC)).isoformat(),
        "interval": 15,
    }


def bulk(
    metrics: list[dict[str, Any]] | None = None, applications: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"applications": applications or [], "metrics": metrics or []}


async def raw(client: Any, feature: str, hours_back: int | None = None) -> list[dict[str, Any]]:
    path = URL(raw_path(feature, hours_back), encoded=True)
    response = await client.get(path, headers=auth(ADMIN_KEY))
    assert response.status == 200, await response.text()
    body = await response.json()
    assert body["version"] == 1 and body["maturity"] == "stable"
    data: list[dict[str, Any]] = body["data"]
    return data


async def post(
    client: Any,
    body: Any,
    key: str = DEV_KEY,
    path: str = BULK,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """POST ``body`` (JSON, or bytes sent as they are) to a test app with ``key``: the status
    and the JSON answer. A 202 is empty (None); any other answer is JSON."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {**auth(key), "Content-Type": "application/json", **(headers or {})}
    response = await client.post(path, data=data, headers=sent)
    answer = await response.read()
    if response.status == 202:
        assert answer == b"", answer[:200]
        return 202, None
    assert response.content_type == "application/json", (response.status, answer[:200])
    return response.status, json.loads(answer)


def assert_error(body: dict[str, Any], name: str) -> None:
    """Every error body has Unleash's shape."""
    assert set(body) == {"id", "name", "message", "details"}, body
    assert body["name"] == name, body
    assert isinstance(body["id"], str) and body["id"]
    assert body["message"]
    assert body["details"] and all("message" in d for d in body["details"])
