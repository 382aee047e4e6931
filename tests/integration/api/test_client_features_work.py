"""What one ``GET /api/client/features`` costs, in both modes: the flags are rendered once
per change (``relay_client_features_renders_total{kind="full"}``), and an answer for any
query is put together from the fragments it returns, so a made-up ``namePrefix``,
``project`` or flag name costs no render of the scope (docs/api.md, "What SDKs get").
Counted, not timed: ``bench/hostile.py render`` shows the latencies."""

from __future__ import annotations

from typing import Any

from conftest import DEV_KEY, MakeClient
from fake_upstream import FakeUpstream
from flagkit import client_features, create_flag, ok
from service import sample

FLAGS = 40
RELAY_FLAGS = 2_000


async def counts(client: Any) -> tuple[float, float, float]:
    """(renders of every flag, answers put together, fragments put together) so far."""
    text = await (await client.get("/internal-backstage/metrics")).text()
    renders = sample(text, "relay_client_features_renders_total")
    derived = sample(text, "relay_client_features_renders_total", kind="derived")
    return renders - derived, derived, sample(text, "relay_client_features_fragments_total")


async def hostile(client: Any, key: str, queries: list[str], names: list[str]) -> int:
    """Every query asked once, every name looked up (none exists): the features returned."""
    returned = 0
    for query in queries:
        status, body, _ = await client_features(client, key, query=query)
        assert status == 200, body
        returned += len(body["features"])
    for name in names:
        headers = {"Authorization": key, "Unleash-Client-Spec": "5.1.9"}
        response = await client.get(f"/api/client/features/{name}", headers=headers)
        assert response.status == 404
    return returned


def made_up(count: int) -> list[str]:
    """Fixed values, as an attacker's random ones: none is a flag, a project or a prefix."""
    return [f"zq{i:05d}" for i in range(count)]


async def test_a_standalone_answer_costs_what_it_returns(make_client: MakeClient) -> None:
    client = await make_client()
    for i in range(FLAGS):
        await create_flag(client, f"flag-{i:03d}")
    body = {"type": "client", "environment": "development", "projects": ["*"]}
    key = (await ok(client, "POST", "/api/admin/api-tokens", body, status=201))["secret"]
    assert len((await client_features(client, key))[1]["features"]) == FLAGS  # rendered once
    before = await counts(client)
    queries = [
        *(f"?namePrefix={value}" for value in made_up(20)),  # nothing returned
        *(f"?project=default&project={value}" for value in made_up(5)),  # every flag
        "?namePrefix=flag-00",  # ten of them
        "?project=nothing",
    ]
    returned = await hostile(client, key, queries, made_up(10))
    full, derived, fragments = (a - b for a, b in zip(await counts(client), before, strict=True))
    assert returned == 5 * FLAGS + 10
    assert (full, derived, fragments) == (0, len(queries), returned)


async def test_a_relay_answer_costs_what_it_returns(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features = {
        "version": 2,
        "features": [
            {"name": f"flag-{i:04d}", "enabled": True, "project": "default", "strategies": []}
            for i in range(RELAY_FLAGS)
        ],
    }
    relay = await make_relay()
    # the scope's answer, then a query each for SDKs with and without segments: each form's
    # flags are rendered once
    assert len((await client_features(relay, DEV_KEY))[1]["features"]) == RELAY_FLAGS
    for spec in ("5.1.9", None):
        await client_features(relay, DEV_KEY, query="?namePrefix=flag-1999", spec=spec)
    before = await counts(relay)
    queries = [
        *(f"?namePrefix={value}" for value in made_up(20)),
        *(f"?project=default&project={value}" for value in made_up(3)),  # the key's: all
        "?namePrefix=flag-000",
    ]
    returned = await hostile(relay, DEV_KEY, queries, made_up(10))
    await client_features(relay, DEV_KEY, query="?namePrefix=flag-0001", spec=None)
    full, derived, fragments = (a - b for a, b in zip(await counts(relay), before, strict=True))
    # the key's projects asked for are its scope's own answer, held: only the prefixes and
    # the older SDK's query put answers together
    assert returned == 3 * RELAY_FLAGS + 10
    assert (full, derived, fragments) == (0, 20 + 1 + 1, 10 + 1)
