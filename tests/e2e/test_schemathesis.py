"""Schemathesis against the service's own OpenAPI document, for both modes and both key types.

The real program runs as a subprocess on a real socket: a standalone service, and a relay in
front of it (a real upstream, so key validation and pass-through calls really happen). Every
operation of ``/docs/openapi.json`` is fuzzed with valid and invalid requests, once with an
admin key and once with a client key; every answer must be documented (status code, content
type, body schema) and no answer may be a 5xx.

Test items are made per operation at collection time, before any server runs, so the schemas
are the documents ``build_app`` serves; ``test_served_document_is_the_one_fuzzed`` checks that
each running service serves exactly that document at ``/docs/openapi.json``.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from conftest import ADMIN_KEY, DEV_KEY, PROD_KEY, relay_settings, standalone_settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from service import Service, running

from relay.api.state import OPENAPI
from relay.app import build_app

pytestmark = pytest.mark.process  # against a standalone and a relay running as programs

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
KEYS = pytest.mark.parametrize("key", [ADMIN_KEY, DEV_KEY], ids=["admin-key", "client-key"])
# A deeper local run: FUZZ_EXAMPLES=300 pytest tests/e2e/test_schemathesis.py (about 4 minutes).
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# build_app only builds: nothing is opened or written until the app starts.
_UNUSED = Path("never-created")
DOCUMENTS = {
    "standalone": build_app(standalone_settings(_UNUSED))[OPENAPI].document(),
    "relay": build_app(relay_settings(_UNUSED, "http://127.0.0.1:9"))[OPENAPI].document(),
}
standalone_schema = schemathesis.openapi.from_dict(DOCUMENTS["standalone"])
relay_schema = schemathesis.openapi.from_dict(DOCUMENTS["relay"])
STREAM = "/api/client/streaming"
"""Open for as long as its client reads: an example of it lasts seconds (20 took 130 s a
mode, a sixth of the suite's time), so it is fuzzed apart, with a few."""
STREAM_FUZZ = settings(FUZZ, max_examples=min(3, FUZZ.max_examples))
STREAM_READ = 3.0  # seconds a stream is read: its hydration comes at once


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY,
        "RELAY_INIT_CLIENT_API_TOKENS": f"{DEV_KEY},{PROD_KEY}",
        "RELAY_LOG_LEVEL": "WARNING",
    }
    with running(tmp_path_factory.mktemp("standalone"), env=env) as service:
        yield service


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory, standalone: Service) -> Iterator[Service]:
    """A relay whose upstream is the standalone service; SDK keys are validated upstream."""
    env = {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": standalone.url,
        "RELAY_UPSTREAM_TOKENS": f"{DEV_KEY},{PROD_KEY}",
        "RELAY_FLUSH_INTERVAL": "0.2",
        "RELAY_LOG_LEVEL": "WARNING",
    }
    with running(tmp_path_factory.mktemp("relay"), env=env, name="relay") as service:
        yield service


SESSION = requests.Session()
"""Every call's: without one, each makes a session that reads the environment for proxies
(a tenth of this module's CPU). Otherwise as without it: a connection per request
(``Connection: close``: no request meets a connection the service is closing), and no
cookie kept from one answer for the next request (a sign-in's would be sent on)."""
SESSION.trust_env = False
SESSION.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


def _call(case: Any, service: Service, key: str, timeout: float = 10) -> None:
    headers = {"Authorization": key, "Connection": "close"}
    case.call_and_validate(
        base_url=service.url, session=SESSION, headers=headers, checks=CHECKS, timeout=timeout
    )


@standalone_schema.exclude(path=STREAM).parametrize()
@KEYS
@FUZZ
def test_standalone_conforms_to_its_document(case: Any, standalone: Service, key: str) -> None:
    _call(case, standalone, key)


@relay_schema.exclude(path=STREAM).parametrize()
@KEYS
@FUZZ
def test_relay_conforms_to_its_document(case: Any, relay: Service, key: str) -> None:
    _call(case, relay, key)


@standalone_schema.include(path=STREAM).parametrize()
@KEYS
@STREAM_FUZZ
def test_standalone_stream_conforms_to_its_document(
    case: Any, standalone: Service, key: str
) -> None:
    _call(case, standalone, key, timeout=STREAM_READ)


@relay_schema.include(path=STREAM).parametrize()
@KEYS
@STREAM_FUZZ
def test_relay_stream_conforms_to_its_document(case: Any, relay: Service, key: str) -> None:
    _call(case, relay, key, timeout=STREAM_READ)


@pytest.mark.parametrize("mode", ["standalone", "relay"])
def test_served_document_is_the_one_fuzzed(mode: str, request: pytest.FixtureRequest) -> None:
    service: Service = request.getfixturevalue(mode)
    with urllib.request.urlopen(f"{service.url}/docs/openapi.json", timeout=10) as response:
        assert response.headers.get_content_type() == "application/json"
        assert json.load(response) == json.loads(json.dumps(DOCUMENTS[mode]))
