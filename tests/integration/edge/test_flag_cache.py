"""Relay mode serves flags from its cache: one upstream fetch per scope (keys of one projects
and environment), first requests coalesced, revalidated with ``If-None-Match`` every
``features_refresh_interval``, filtered and shaped locally, kept through upstream outages and
restarts (``cache.db``), refusals passed on. A real app on a real socket, a real SQLite
file, the fake upstream on another socket."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from cachekit import OTHER_DEV_KEY, SPEC, get, stored_scopes
from conftest import DEV_KEY, PROD_KEY, MakeClient, assert_error, auth, relay_settings
from fake_upstream import Answer, FakeUpstream, Received
from service import eventually, free_port, sample

from relay.app import build_app
from relay.edge.flags.store import FlagScope

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

EVERY_DEV_KEY = "*:development.every-project-secret-0123456789"

SEGMENTED = {
    "version": 2,
    "features": [
        {
            "name": "checkout",
            "type": "release",
            "enabled": True,
            "project": "shop",
            "stale": False,
            "strategies": [
                {
                    "name": "default",
                    "constraints": [{"contextName": "a", "operator": "IN", "values": ["1"]}],
                    "parameters": {},
                    "variants": [],
                    "segments": [7],
                }
            ],
            "variants": [],
            "dependencies": [{"feature": "parent", "enabled": True}],
            "impressionData": False,
        },
        {"name": "checkout-v2", "enabled": False, "project": "shop", "strategies": []},
        {"name": "search", "enabled": True, "project": "default", "strategies": []},
    ],
    "segments": [
        {
            "id": 7,
            "name": "testers",
            "constraints": [{"contextName": "b", "operator": "IN", "values": ["2"]}],
        },
        {"id": 8, "name": "unused", "constraints": []},
    ],
    "meta": {"revisionId": 42, "etag": '"upstream"', "queryHash": "x"},
}


def fetches(upstream: FakeUpstream, key: str = DEV_KEY) -> list[Received]:
    return [r for r in upstream.flag_fetches if r.headers["Authorization"] == key]


async def test_sdk_polls_are_served_from_one_upstream_fetch(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay()
    status, body, headers = await get(relay)
    assert status == 200
    assert [f["name"] for f in body["features"]] == ["f1"]
    assert body["query"]["environment"] == "development"
    assert "fetch-mode" not in headers  # the relay carries no streaming
    etag = headers["ETag"]
    for _ in range(20):
        assert (await get(relay))[0] == 200
    unchanged = await relay.get(
        "/api/client/features", headers={**auth(DEV_KEY), **SPEC, "If-None-Match": etag}
    )
    assert unchanged.status == 304 and unchanged.headers["ETag"] == etag
    assert await unchanged.read() == b""
    [fetch] = fetches(upstream)
    assert fetch.path == "/api/client/features" and fetch.method == "GET"
    assert fetch.headers["Authorization"] == DEV_KEY
    assert fetch.headers["Unleash-Client-Spec"] == "5.2.0"
    assert fetch.headers["Unleash-AppName"] == "relay"
    assert "If-None-Match" not in fetch.headers


async def test_first_requests_of_a_scope_share_one_fetch(
    make_relay: MakeClient, upstream: FakeUpstream, relay_workers: int
) -> None:
    """One fetch per scope for all the requests at once on a worker (the workers' first
    fetches are their own until one has stored a copy)."""
    upstream.valid_keys[OTHER_DEV_KEY] = "development"
    upstream.features_answer = Answer(200, delay=0.5)
    relay = await make_relay(client_tokens=[DEV_KEY, OTHER_DEV_KEY, PROD_KEY])
    keys = [DEV_KEY, OTHER_DEV_KEY] * 50 + [PROD_KEY] * 10
    answers = await asyncio.gather(*(get(relay, key=key) for key in keys))
    assert [status for status, _, _ in answers] == [200] * len(keys)
    # two scopes (development, production of project default): one fetch each a worker at
    # most (a worker whose first request finds the other's stored copy fetches none)
    environments = [r.headers["Authorization"].split(".")[0] for r in upstream.flag_fetches]
    per_scope = {e: environments.count(e) for e in set(environments)}
    assert set(per_scope) == {"default:development", "default:production"}, environments
    assert all(1 <= n <= relay_workers for n in per_scope.values()), environments


async def test_a_scope_is_revalidated_each_interval_and_changes_reach_sdks(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(features_refresh_interval=0.2)
    headers = (await get(relay))[2]
    await eventually(lambda: len(fetches(upstream)) >= 4, "three revalidations")
    for fetch in fetches(upstream)[1:]:
        assert fetch.headers["If-None-Match"] == '"v1"'
    upstream.features = {**upstream.features, "features": [{"name": "f2", "strategies": []}]}
    upstream.features_etag = '"v2"'

    async def changed() -> bool:
        status, body, _ = await get(relay, **{"If-None-Match": headers["ETag"]})
        return status == 200 and [f["name"] for f in body["features"]] == ["f2"]

    await eventually(changed, "the change served")


async def test_upstream_fetches_do_not_grow_with_sdk_polls(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(features_refresh_interval=0.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    polls = 0
    while loop.time() - started < 2.0:
        assert (await get(relay))[0] == 200
        polls += 1
    elapsed = loop.time() - started
    # the polled scope (other configured keys' scopes refresh too): at most one fetch per
    # interval (and the first), never one per poll
    polled = len(fetches(upstream))
    assert polled <= elapsed / 0.5 + 2, (polled, polls)
    assert polls > 10 * polled


async def test_the_copy_is_served_while_the_upstream_is_down(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    relay = await make_relay(features_refresh_interval=0.1)
    status, before, _ = await get(relay)
    assert status == 200
    upstream.features_answer = Answer(503)
    fetches = len(upstream.flag_fetches)
    await eventually(lambda: len(upstream.flag_fetches) > fetches + 2, "refreshes failing")
    for _ in range(10):
        status, body, _ = await get(relay)
        assert (status, body) == (200, before)
    await upstream.close()  # not even reachable
    assert (await get(relay))[:2] == (200, before)


async def test_a_scope_without_a_copy_gets_503_while_the_upstream_is_down(
    make_relay: MakeClient, upstream: FakeUpstream, relay_workers: int
) -> None:
    relay = await make_relay(client_tokens=[])  # PROD_KEY is validated upstream
    upstream.features_answer = Answer(503)
    status, body, _ = await get(relay, key=PROD_KEY)
    assert status == 503
    assert_error(body, "ServiceUnavailableError")
    # asked again at once: answered without asking the upstream (each worker holds off for
    # a second after its own failed fetch)
    assert (await get(relay, key=PROD_KEY))[0] == 503
    assert (await get(relay, key=PROD_KEY))[0] == 503
    assert len(fetches(upstream, PROD_KEY)) == relay_workers
    upstream.features_answer = None

    async def served() -> bool:
        return (await get(relay, key=PROD_KEY))[0] == 200

    await eventually(served, "flags once the upstream is back")


async def test_a_key_the_upstream_refuses_gets_its_status(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.refused = {PROD_KEY: 403}
    relay = await make_relay(client_tokens=[DEV_KEY, PROD_KEY, OTHER_DEV_KEY])
    status, body, _ = await get(relay, key=OTHER_DEV_KEY)  # not valid upstream: 401 there
    assert status == 401
    assert_error(body, "AuthenticationRequired")
    status, body, _ = await get(relay, key=PROD_KEY)
    assert status == 403
    assert_error(body, "NoAccessError")
    fetches = len(upstream.flag_fetches)
    assert (await get(relay, key=PROD_KEY))[0] == 403  # remembered: not asked again
    assert len(upstream.flag_fetches) == fetches
    # a key of the same scope that the upstream accepts is not held up by the refused one
    assert (await get(relay, key=DEV_KEY))[0] == 200


async def test_a_scope_whose_key_is_revoked_upstream_loses_its_copy(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    relay = await make_relay(features_refresh_interval=0.1)
    assert (await get(relay))[0] == 200
    scope = FlagScope("development", ("default",))
    await eventually(lambda: scope in stored_scopes(tmp_path / "relay"), "the copy stored")
    upstream.refused = {DEV_KEY: 401}

    async def refused() -> bool:
        return (await get(relay))[0] == 401

    await eventually(refused, "the revoked key refused")
    await eventually(lambda: scope not in stored_scopes(tmp_path / "relay"), "the copy deleted")


async def test_project_and_name_prefix_are_applied_locally_with_their_etags(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features = SEGMENTED
    upstream.valid_keys[EVERY_DEV_KEY] = "development"
    relay = await make_relay(client_tokens=[EVERY_DEV_KEY])
    queries = {
        "": ["checkout", "checkout-v2", "search"],
        "?project=shop": ["checkout", "checkout-v2"],
        "?project=default&project=shop": ["checkout", "checkout-v2", "search"],
        "?project=nope": [],
        "?namePrefix=checkout-": ["checkout-v2"],
        "?project=default&namePrefix=check": [],
    }
    etags = set()
    for query, names in queries.items():
        status, body, headers = await get(relay, f"/api/client/features{query}", EVERY_DEV_KEY)
        assert status == 200
        assert [f["name"] for f in body["features"]] == names, query
        assert body["meta"]["etag"] == headers["ETag"] and body["meta"]["revisionId"] == 42
        etags.add(headers["ETag"])
        again = await get(
            relay,
            f"/api/client/features{query}",
            EVERY_DEV_KEY,
            **{"If-None-Match": headers["ETag"]},
        )
        assert again[0] == 304, query
    assert len(etags) == len(queries)
    [fetch] = upstream.flag_fetches  # one fetch, without the query: filters are the relay's
    assert fetch.path == "/api/client/features"
    # what no SDK of this relay knows is kept as the upstream sent it
    _, body, _ = await get(relay, key=EVERY_DEV_KEY)
    assert body["features"][0]["dependencies"] == [{"feature": "parent", "enabled": True}]
    assert [s["id"] for s in body["segments"]] == [7]  # only those used


async def test_sdks_older_than_segments_get_them_inlined(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features = SEGMENTED
    upstream.valid_keys[EVERY_DEV_KEY] = "development"
    relay = await make_relay(client_tokens=[EVERY_DEV_KEY])
    own = [{"contextName": "a", "operator": "IN", "values": ["1"]}]
    inlined = [*own, {"contextName": "b", "operator": "IN", "values": ["2"]}]
    for spec in ("4.1.0", "3.3.0", "4.2.0-beta.1"):
        status, body, _ = await get(relay, key=EVERY_DEV_KEY, **{"Unleash-Client-Spec": spec})
        assert status == 200
        [strategy] = body["features"][0]["strategies"]
        assert strategy["constraints"] == inlined and "segments" not in strategy, spec
        assert "segments" not in body and body["query"]["inlineSegmentConstraints"] is True
    no_header = await relay.get("/api/client/features", headers=auth(EVERY_DEV_KEY))
    [strategy] = (await no_header.json())["features"][0]["strategies"]
    assert strategy["constraints"] == inlined
    _, body, _ = await get(relay, key=EVERY_DEV_KEY)
    [strategy] = body["features"][0]["strategies"]
    assert strategy["constraints"] == own and strategy["segments"] == [7]
    status, body, _ = await get(relay, key=EVERY_DEV_KEY, **{"Unleash-Client-Spec": "five"})
    assert status == 400
    assert_error(body, "BadDataError")
    assert len(upstream.flag_fetches) == 1


async def test_one_feature(make_relay: MakeClient, upstream: FakeUpstream) -> None:
    upstream.features = SEGMENTED
    upstream.valid_keys[EVERY_DEV_KEY] = "development"
    relay = await make_relay(client_tokens=[EVERY_DEV_KEY])
    status, body, _ = await get(relay, "/api/client/features/checkout", EVERY_DEV_KEY)
    assert status == 200 and body["name"] == "checkout" and body["strategies"][0]["segments"] == [7]
    old = {"Unleash-Client-Spec": "4.0.0"}
    status, body, _ = await get(relay, "/api/client/features/checkout", EVERY_DEV_KEY, **old)
    assert status == 200 and len(body["strategies"][0]["constraints"]) == 2
    for path in ("/api/client/features/nope", "/api/client/features/search?project=shop"):
        status, body, _ = await get(relay, path, EVERY_DEV_KEY)
        assert status == 404, path
        assert_error(body, "NotFoundError")
    assert len(upstream.flag_fetches) == 1


async def test_a_relay_restarted_while_the_upstream_is_down_serves_its_stored_copy(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path, aiohttp_client: Any
) -> None:
    validated = "default:development.validated-upstream-secret-0123456789"
    upstream.valid_keys[validated] = "development"
    upstream.features = SEGMENTED | {"features": SEGMENTED["features"][2:]}
    relay = await make_relay(client_tokens=[PROD_KEY])
    _, before, _ = await get(relay, key=validated)  # a key the relay learnt from the upstream
    assert (await get(relay, key=PROD_KEY))[0] == 200
    await relay.close()  # what it fetched is written as it stops
    await upstream.close()

    nobody = f"http://127.0.0.1:{free_port()}"  # the upstream: nothing listens there
    settings = relay_settings(tmp_path / "relay", nobody, client_tokens=[PROD_KEY])
    again = await aiohttp_client(build_app(settings))
    ready = await again.get("/ready")
    assert ready.status == 200  # its configured key has a stored copy
    status, body, _ = await get(again, key=validated)
    assert (status, body) == (200, before)
    assert (await get(again, key=PROD_KEY))[0] == 200
    unknown = "default:development.never-seen-secret-0123456789"
    assert (await get(again, key=unknown))[0] == 503  # cannot be checked: retry later


async def test_ready_once_every_configured_key_has_flags(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features_answer = Answer(503)
    relay = await make_relay(features_refresh_interval=0.2)
    response = await relay.get("/ready")
    assert response.status == 503
    assert (await response.json()) == {"status": "NOT_READY"}
    await asyncio.sleep(0.5)
    assert (await relay.get("/ready")).status == 503  # still nothing: the upstream is down
    upstream.features_answer = None

    async def ready() -> bool:
        return (await relay.get("/ready")).status == 200

    await eventually(ready, "ready once the upstream answers")
    # ready means served: both configured keys (two environments) have their flags
    assert (await get(relay, key=DEV_KEY))[0] == 200
    assert (await get(relay, key=PROD_KEY))[0] == 200


async def test_a_relay_without_configured_keys_is_ready_at_once(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features_answer = Answer(503)
    relay = await make_relay(client_tokens=[])
    assert (await relay.get("/ready")).status == 200
    assert upstream.flag_fetches == []


async def test_cache_metrics(make_relay: MakeClient, upstream: FakeUpstream) -> None:
    relay = await make_relay()
    etag = (await get(relay))[2]["ETag"]
    assert (await get(relay, **{"If-None-Match": etag}))[0] == 304

    async def text() -> str:
        return await (await relay.get("/internal-backstage/metrics")).text()

    async def reported() -> bool:
        found = await text()
        return sample(found, "relay_flag_cache_scopes") >= 1 and 'projects="default"' in found

    await eventually(reported, "the cache reported")
    found = await text()
    age = sample(
        found, "relay_flag_cache_age_seconds", environment="development", projects="default"
    )
    assert 0 <= age < 60
    assert sample(found, "relay_flag_cache_bytes") > 0
    fetched = "relay_upstream_request_duration_seconds_count"
    assert sample(found, fetched, operation="features", outcome="200") >= 1
    served = "relay_http_requests_total"
    assert sample(found, served, route="/api/client/features", status="200") >= 1
    assert sample(found, served, route="/api/client/features", status="304") >= 1
    assert DEV_KEY.split(".")[1] not in found
