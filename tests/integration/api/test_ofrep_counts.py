"""OFREP's evaluations counted as SDK usage: per flag answered, for the context's
``appName`` in the key's environment, through the durable ingest path; at a relay, carried
upstream once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import MakeClient, raw
from flagkit import FEATURES, env_path, http
from ofrepkit import FRONT, build, evaluate, one_path
from sdks import VARIANT_SEED, bucket
from service import eventually, relay_env, running, settle


async def test_evaluations_are_counted_for_the_app_in_the_key_s_environment(
    make_client: MakeClient,
) -> None:
    """Each flag answered counts as an SDK's evaluation would (yes/no, the variant), for
    the context's appName in the key's environment (never the context's); failures do not."""
    client = await make_client(init_frontend_api_tokens=[FRONT])
    await build(client)
    context = {"targetingKey": "erin", "appName": "shop", "environment": "production"}
    for _ in range(3):
        assert (await evaluate(client, context=context))[0] == 200
    assert (await evaluate(client, one_path("split"), context))[0] == 200
    assert (await evaluate(client, one_path("broken"), context))[0] == 400
    side = "left" if bucket("split", "erin", 1000, VARIANT_SEED) <= 500 else "right"

    async def counted() -> bool:
        rows = await raw(client, "split")
        return bool(rows) and rows[0]["yes"] == 4

    await eventually(counted, "the counts written")
    (row,) = await raw(client, "split")
    assert (row["appName"], row["environment"]) == ("shop", "development")
    assert (row["yes"], row["no"], row["variants"]) == (4, 0, {side: 4})
    (off,) = await raw(client, "off")
    assert (off["yes"], off["no"], off["variants"]) == (0, 3, {})
    assert await raw(client, "broken") == []
    # without an appName, the Frontend API's default names the application
    await evaluate(client, one_path("on"), {"targetingKey": "erin"})

    async def default_app() -> bool:
        return any(r["appName"] == "frontend-api" for r in await raw(client, "on"))

    await eventually(default_app, "counted for frontend-api")


ADMIN = "*:*.ofrep-counts-admin-0123456789abcdef"
CLIENT = "default:development.ofrep-counts-client-0123456789"
RELAY_FRONT = "default:development.ofrep-counts-front-012345678901"


def _evaluate_at(url: str, key: str, times: int) -> None:
    for _ in range(times):
        body = {"context": {"targetingKey": "u1", "appName": "shop"}}
        status, answer = http("POST", f"{url}/ofrep/v1/evaluate/flags", body, key)
        assert status == 200, answer
        assert {f["key"] for f in answer["flags"]} == {"counted"}


@pytest.mark.process
def test_a_relay_carries_the_counts_upstream_once(tmp_path: Path) -> None:
    """At a relay on its default worker count: counted by frontend and client keys, sent
    upstream once (``settle`` checks that nothing arrives twice), and the last second's
    counts written as it stops, then flushed."""
    central_env = {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
        "RELAY_INIT_FRONTEND_API_TOKENS": RELAY_FRONT,
    }
    with running(tmp_path / "central", env=central_env, name="central") as central:
        path = f"{central.url}{FEATURES.format(project='default')}"
        assert http("POST", path, {"name": "counted"}, ADMIN)[0] == 201
        assert http("POST", f"{central.url}{env_path('counted')}/on", key=ADMIN)[0] == 200
        env = relay_env(
            central.url,
            CLIENT,
            RELAY_WORKERS="auto",
            RELAY_CLIENT_TOKENS=CLIENT,
            RELAY_FRONTEND_TOKENS=RELAY_FRONT,
        )
        with running(tmp_path / "relay", env=env, name="relay") as relay:
            _evaluate_at(relay.url, RELAY_FRONT, 7)
            _evaluate_at(relay.url, CLIENT, 5)
            settle(central, ADMIN, "counted", 12, relay=(relay, CLIENT))
            _evaluate_at(relay.url, RELAY_FRONT, 3)
            assert relay.stop() == 0  # at once: the counts of the last second too
        settle(central, ADMIN, "counted", 15)
