"""The Unleash Proxy's paths at a relay: its keys, the upstream's flags, and the
``proxied`` relay (fixture) once it is ready."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import MakeClient
from fake_upstream import FakeUpstream
from service import eventually

KEY = "some-secret"
API_KEY = "*:development.proxy-paths-upstream-0123456789abcdef"  # every project
SERVER = "server-side-key"
FLAGS = [
    {"name": "on", "enabled": True, "project": "default", "strategies": []},
    {"name": "off", "enabled": False, "project": "default", "strategies": []},
    {
        "name": "web.colour",
        "enabled": True,
        "project": "web",
        "strategies": [],
        "variants": [
            {
                "name": "blue",
                "weight": 1000,
                "weightType": "variable",
                "stickiness": "default",
                "payload": {"type": "string", "value": "b"},
            }
        ],
    },
    {
        "name": "dated",
        "enabled": True,
        "project": "default",
        "strategies": [
            {
                "name": "default",
                "constraints": [
                    {
                        "contextName": "currentTime",
                        "operator": "DATE_BEFORE",
                        "value": "2000-01-01T00:00:00.000Z",
                    }
                ],
            }
        ],
    },
    {
        "name": "for-shop",
        "enabled": True,
        "project": "default",
        "strategies": [
            {
                "name": "default",
                "constraints": [
                    {"contextName": "appName", "operator": "IN", "values": ["unleash-proxy"]},
                    {"contextName": "environment", "operator": "IN", "values": ["default"]},
                ],
            }
        ],
    },
]


async def ready(relay: Any) -> Any:
    """The relay once it holds the flags of its key (the Proxy's paths answer 503 before)."""
    await eventually(lambda: _ready(relay), "the relay holds its flags")
    return relay


async def _ready(relay: Any) -> bool:
    return bool((await relay.get("/ready")).status == 200)


@pytest.fixture(autouse=True)
def _flags(upstream: FakeUpstream) -> None:
    """The upstream serves FLAGS to API_KEY."""
    upstream.features = {"version": 2, "features": FLAGS}
    upstream.valid_keys[API_KEY] = "development"


@pytest.fixture
async def proxied(make_relay: MakeClient, upstream: FakeUpstream) -> Any:
    relay = await make_relay(
        client_tokens=[API_KEY],
        proxy_client_keys=[KEY, "other key"],
        proxy_server_keys=[SERVER],
        app_name="unleash-proxy",
        disable_all_endpoint=True,
    )
    return await ready(relay)
