"""Keys only the upstream knows, for the tests of the keys a relay accepts: the relays under
test are started with ``client_tokens=[]`` and ask the fake upstream (``/edge/validate``)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import auth, bulk, metric
from fake_upstream import FakeUpstream

UP_DEV_KEY = "default:development.upstream-dev-secret-0123456789"
UP_PROD_KEY = "default:production.upstream-prod-secret-0123456789"
UP_ADMIN_KEY = "*:*.upstream-admin-secret-0123456789"
UNKNOWN_KEY = "default:development.nobody-knows-this-secret-0123456789"


@pytest.fixture(autouse=True)
def upstream_keys(upstream: FakeUpstream) -> None:
    """The fake upstream also vouches for ``UP_DEV_KEY``, ``UP_PROD_KEY`` and the admin key
    ``UP_ADMIN_KEY`` (a test module uses it by importing it)."""
    upstream.valid_keys.update({UP_DEV_KEY: "development", UP_PROD_KEY: "production"})
    upstream.admin_keys.add(UP_ADMIN_KEY)


async def send_bulk(relay: Any, key: str, metrics: list[dict[str, Any]] | None = None) -> Any:
    """A bulk post with ``key`` (one count of f1 unless ``metrics``): the response itself, for
    its status, headers and body."""
    body = bulk(metrics if metrics is not None else [metric(yes=1)])
    return await relay.post("/api/client/metrics/bulk", json=body, headers=auth(key))
