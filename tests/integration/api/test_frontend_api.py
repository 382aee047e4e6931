"""The Frontend API over real sockets, in both modes: what a browser SDK asks and gets.

The flags' evaluation itself is proven against the client specification and Unleash's own
engine (tests/*/core/test_evaluate_*.py); here: the paths, the context as Unleash reads it from a
query or a body, the answers' shapes, ETag and 304, the scope of a frontend key, errors,
and a relay answering from its copy through an outage.
"""

from __future__ import annotations

import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl

import pytest
from conftest import ADMIN_KEY, DEV_KEY, MakeClient, assert_error, auth
from fake_upstream import Answer, FakeUpstream
from flagkit import add_strategy, create_flag, ok, rollout, turn
from frontkit import FRONT_KEY
from hypothesis import example, given
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from service import sample

from relay.core.catalog import Rendered
from relay.core.frontend import Frontends
from relay.core.frontend_context import context_of, from_pairs, from_query
from relay.settings import SettingsError

PROD_FRONT_KEY = "default:production.front-secret-for-tests-0123456789"


def iso(delta: timedelta) -> str:
    return (datetime.now(UTC) + delta).isoformat(timespec="seconds").replace("+00:00", "Z")


async def build(client: Any) -> None:
    """Flags of every kind the tests read, in project default's development."""
    await ok(client, "POST", "/api/admin/projects", {"id": "other", "name": "other"}, 201)
    env = {"environment": "development"}
    await ok(client, "POST", "/api/admin/projects/other/environments", env)
    for name in ("on", "off", "vip", "half", "by-plan", "later", "here", "colours"):
        await create_flag(client, name)
    await create_flag(client, "elsewhere", project="other")
    await turn(client, "elsewhere", project="other")
    await add_strategy(client, "vip", {"name": "userWithId", "parameters": {"userIds": "alice"}})
    await add_strategy(client, "half", rollout(50, stickiness="userId", groupId="half"))
    plan = {"contextName": "plan", "operator": "IN", "values": ["gold"]}
    await add_strategy(client, "by-plan", {"name": "default", "constraints": [plan]})
    # the server's clock decides: a caller's currentTime is only a property
    future = {
        "contextName": "currentTime",
        "operator": "DATE_AFTER",
        "value": iso(timedelta(days=3650)),
    }
    await add_strategy(client, "later", {"name": "default", "constraints": [future]})
    here = {"name": "remoteAddress", "parameters": {"IPs": "127.0.0.1"}}
    await add_strategy(client, "here", here)
    colours = rollout(100, stickiness="userId", groupId="colours")
    colours["variants"] = [
        {
            "name": "blue",
            "weight": 1000,
            "weightType": "variable",
            "stickiness": "userId",
            "payload": {"type": "string", "value": "#00f"},
        },
    ]
    await add_strategy(client, "colours", colours)
    for name in ("on", "vip", "half", "by-plan", "later", "here", "colours"):
        await turn(client, name)


async def frontend(
    client: Any, query: str = "", key: str = FRONT_KEY, path: str = "/api/frontend", **kw: Any
) -> tuple[int, Any, Any]:
    response = await client.get(f"{path}{query}", headers=auth(key) | kw.pop("headers", {}))
    raw = await response.read()
    return response.status, (await response.json() if raw else None), response.headers


def names(body: dict[str, Any]) -> set[str]:
    return {toggle["name"] for toggle in body["toggles"]}


@pytest.fixture
async def standalone(make_client: MakeClient) -> Any:
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    await build(client)
    return client


async def test_enabled_flags_for_a_context(standalone: Any) -> None:
    status, body, headers = await frontend(standalone, "?userId=alice&sessionId=s1")
    assert status == 200, body
    assert headers["Cache-Control"] == "no-cache"
    assert {"on", "vip", "here", "colours"} <= names(body)
    assert not names(body) & {"off", "later", "by-plan", "elsewhere"}
    toggle = next(t for t in body["toggles"] if t["name"] == "colours")
    assert toggle == {
        "name": "colours",
        "enabled": True,
        "variant": {
            "name": "blue",
            "enabled": True,
            "payload": {"type": "string", "value": "#00f"},
            "feature_enabled": True,
            "featureEnabled": True,
        },
        "impressionData": False,
    }
    plain = next(t for t in body["toggles"] if t["name"] == "on")
    assert plain["variant"] == {
        "name": "disabled",
        "enabled": False,
        "feature_enabled": True,
        "featureEnabled": True,
    }
    _, bob, _ = await frontend(standalone, "?userId=bob&sessionId=s1")
    assert "vip" not in names(bob)


@given(st.text(alphabet="ab=&+%[]5Bé2 ", max_size=40))
@example("properties%5Bplan%5D=gold+club&userId=&&=x&flag&properties[a]=%E9%zz&a=1&a=2")
def test_a_query_reads_as_parse_qsl_reads_it(raw: str) -> None:
    """The handler's own query parser (faster) decodes exactly as ``parse_qsl`` would."""
    assert from_query(raw) == from_pairs(parse_qsl(raw, keep_blank_values=True))


def test_the_answers_kept_take_no_more_memory_than_their_bound() -> None:
    """Small answers (a flag or two) weigh less than their keys: the bound counts both."""
    flag = {"name": "f", "enabled": True, "strategies": [{"name": "default"}]}
    document = {"version": 2, "features": [flag], "segments": []}
    rendered = Rendered(json.dumps(document).encode(), '"e"', 1)
    bound = 1_000_000
    frontends = Frontends(answer_bytes=bound)
    now = datetime.now(UTC)

    def ask(n: int) -> None:
        fields = {"userId": f"user-{n}", "sessionId": f"session-{n}", "appName": "web"}
        properties = {"plan": f"plan-{n % 7}", "region": "eu-west"}
        frontends.answer(rendered, context_of(fields, properties, "127.0.0.1", now), False)

    def evaluated() -> float:
        found = REGISTRY.get_sample_value("relay_frontend_answers_total", {"source": "evaluated"})
        return found or 0.0

    ask(0)  # the scope compiled
    before = evaluated()
    tracemalloc.start()
    try:
        for n in range(1, 20_001):
            ask(n)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert evaluated() - before == 20_000  # none was kept: each context is new
    assert held <= bound * 1.1


async def test_a_rollout_splits_users_and_keeps_each(standalone: Any) -> None:
    seen = [
        "half" in names((await frontend(standalone, f"?userId=user-{i}"))[1]) for i in range(40)
    ]
    assert 5 < sum(seen) < 35
    again = [
        "half" in names((await frontend(standalone, f"?userId=user-{i}"))[1]) for i in range(40)
    ]
    assert again == seen


async def test_properties_from_query_and_body(standalone: Any) -> None:
    for query in ("?properties[plan]=gold", "?plan=gold"):
        assert "by-plan" in names((await frontend(standalone, query))[1]), query
    assert "by-plan" not in names((await frontend(standalone, "?properties[plan]=free"))[1])
    for context in ({"properties": {"plan": "gold"}}, {"plan": "gold"}):
        response = await standalone.post(
            "/api/frontend", json={"context": context}, headers=auth(FRONT_KEY)
        )
        assert response.status == 200
        assert "by-plan" in names(await response.json()), context


async def test_the_callers_clock_is_not_used(standalone: Any) -> None:
    far = iso(timedelta(days=36500))
    assert "later" not in names((await frontend(standalone, f"?currentTime={far}"))[1])
    response = await standalone.post(
        "/api/frontend", json={"context": {"currentTime": far}}, headers=auth(FRONT_KEY)
    )
    assert "later" not in names(await response.json())


async def test_remote_address_defaults_to_the_caller(standalone: Any) -> None:
    assert "here" in names((await frontend(standalone))[1])
    assert "here" not in names((await frontend(standalone, "?remoteAddress=10.1.2.3"))[1])


async def test_etag_304_and_a_change(standalone: Any) -> None:
    _, body, headers = await frontend(standalone, "?userId=alice&sessionId=s1")
    etag = headers["ETag"]
    status, _, again = await frontend(
        standalone, "?userId=alice&sessionId=s1", headers={"If-None-Match": etag}
    )
    assert (status, again["ETag"]) == (304, etag)
    await turn(standalone, "on", on=False)
    status, changed, headers = await frontend(
        standalone, "?userId=alice&sessionId=s1", headers={"If-None-Match": etag}
    )
    assert status == 200 and headers["ETag"] != etag
    assert names(changed) == names(body) - {"on"}


async def test_all_one_and_the_proxy_paths(standalone: Any) -> None:
    _, everything, _ = await frontend(standalone, "?userId=bob", path="/api/frontend/all")
    by_name = {t["name"]: t for t in everything["toggles"]}
    assert by_name["off"]["enabled"] is False and by_name["vip"]["enabled"] is False
    assert "elsewhere" not in by_name  # another project
    status, one, _ = await frontend(standalone, "?userId=alice", path="/api/frontend/features/vip")
    assert (status, one["name"], one["enabled"]) == (200, "vip", True)
    for missing in ("nope", "elsewhere"):
        status, error, _ = await frontend(standalone, path=f"/api/frontend/features/{missing}")
        assert status == 404
        assert_error(error, "NotFoundError")
    _, legacy, _ = await frontend(standalone, "?userId=alice&sessionId=s1", path="/api/proxy")
    _, current, _ = await frontend(standalone, "?userId=alice&sessionId=s1")
    assert legacy == current
    _, legacy_all, _ = await frontend(standalone, "?userId=bob", path="/api/proxy/all")
    assert names(legacy_all) == set(by_name)


async def test_the_all_endpoint_can_be_switched_off(make_client: MakeClient) -> None:
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY], disable_all_endpoint=True)
    for path in ("/api/frontend/all", "/api/proxy/all"):
        assert (await frontend(client, path=path))[0] == 404
    assert (await frontend(client))[0] == 200


@pytest.mark.parametrize(
    "body",
    [
        {"context": {"nested": {"a": 1}}},
        {"context": {"userId": ["a"]}},
        {"context": {f"p{i}": "x" for i in range(101)}},
        {"context": {"properties": {"a": {"b": 1}}}},
        {"context": {"userId": "x" * 5000}},
        {"context": "alice"},
    ],
)
async def test_bad_contexts_are_400(standalone: Any, body: Any) -> None:
    response = await standalone.post("/api/frontend", json=body, headers=auth(FRONT_KEY))
    assert response.status == 400
    assert_error(await response.json(), "BadDataError")


async def test_keys_of_other_types_are_refused(standalone: Any) -> None:
    assert (await frontend(standalone, key=DEV_KEY))[0] in (401, 403)
    assert (await frontend(standalone, key="default:development.unknown-0123456789abcdef"))[
        0
    ] == 401


# --- relay mode: a frontend key's flags come from the copy of a client key's ---

UPSTREAM_FLAGS = {
    "version": 2,
    "features": [
        {"name": "on", "enabled": True, "project": "default", "strategies": [{"name": "default"}]},
        {
            "name": "vip",
            "enabled": True,
            "project": "default",
            "strategies": [{"name": "userWithId", "parameters": {"userIds": "alice"}}],
        },
        {"name": "mine", "enabled": True, "project": "mine", "strategies": [{"name": "default"}]},
    ],
    "segments": [],
}


async def test_a_relay_evaluates_its_upstreams_flags_through_an_outage(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    upstream.features = UPSTREAM_FLAGS
    relay = await make_relay(frontend_tokens=[FRONT_KEY])
    status, body, _ = await frontend(relay, "?userId=alice")
    assert status == 200, body
    assert names(body) == {"on", "vip"}  # not project mine: the key's project is default
    upstream.features_answer = Answer(503)
    _, bob, _ = await frontend(relay, "?userId=bob")
    assert names(bob) == {"on"}


async def test_a_relay_without_a_client_key_for_the_environment_says_so(
    make_relay: Any, upstream: FakeUpstream
) -> None:
    relay = await make_relay(
        frontend_tokens=[FRONT_KEY, PROD_FRONT_KEY],
        client_tokens=[DEV_KEY],
        upstream_tokens=[DEV_KEY],
    )
    assert (await frontend(relay))[0] == 200
    status, body, _ = await frontend(relay, key=PROD_FRONT_KEY)
    assert status == 403
    assert "production" in body["message"]


async def test_a_multi_project_frontend_key_cannot_be_configured_at_a_relay(
    make_relay: Any,
) -> None:
    """Its projects are known only upstream: taken as all of them, it would see too much."""
    with pytest.raises(SettingsError, match="multi-project frontend key names none"):
        await make_relay(frontend_tokens=["[]:development.front-secret-for-tests-0123456789"])


async def test_a_relay_says_at_start_which_frontend_keys_it_cannot_serve(
    make_relay: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await make_relay(
        frontend_tokens=[FRONT_KEY, PROD_FRONT_KEY], client_tokens=[DEV_KEY], upstream_tokens=[]
    )
    warned = [r for r in caplog.records if "frontend key's projects" in r.getMessage()]
    assert [r.__dict__["key"] for r in warned] == ["default:production.****"]


async def test_answers_are_kept_unless_the_flags_read_the_clock(make_client: MakeClient) -> None:
    """A repeated context is answered from what was kept, in a scope whose flags read no
    clock and no chance; in one that does (development's "later"), evaluated every time."""
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY, PROD_FRONT_KEY])
    await build(client)
    await create_flag(client, "steady")
    await add_strategy(client, "steady", rollout(50, groupId="steady"), env="production")
    await turn(client, "steady", env="production")

    async def count(source: str) -> float:
        text = await (await client.get("/internal-backstage/metrics")).text()
        return sample(text, "relay_frontend_answers_total", source=source)

    before = {s: await count(s) for s in ("evaluated", "kept", "varying")}
    for _ in range(3):
        assert (await frontend(client, "?userId=u1&sessionId=s", key=PROD_FRONT_KEY))[0] == 200
        assert (await frontend(client, "?userId=u1&sessionId=s"))[0] == 200
    after = {s: await count(s) for s in ("evaluated", "kept", "varying")}
    assert {s: after[s] - before[s] for s in after} == {"evaluated": 1, "kept": 2, "varying": 3}


async def test_answers_for_a_context_without_session_are_found_again(
    make_client: MakeClient,
) -> None:
    """Without ``sessionId`` the context gets a random one (as Unleash's does), and the
    answer was kept under it: never found again, each poll evaluated and kept anew. An
    answer that did not read that session is now kept without it; one that did (default
    stickiness with no userId) is left to chance, as a random number would be, and never
    kept."""
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    await create_flag(client, "by-user")
    await add_strategy(client, "by-user", rollout(50, groupId="by-user"))
    await turn(client, "by-user")

    async def count(source: str) -> float:
        text = await (await client.get("/internal-backstage/metrics")).text()
        return sample(text, "relay_frontend_answers_total", source=source)

    async def counted(query: str) -> dict[str, float]:
        before = {s: await count(s) for s in ("evaluated", "kept", "varying")}
        for _ in range(3):
            assert (await frontend(client, query))[0] == 200
        return {s: await count(s) - before[s] for s in before}

    assert await counted("?userId=u1") == {"evaluated": 1, "kept": 2, "varying": 0}
    assert await counted("?appName=web") == {"evaluated": 0, "kept": 0, "varying": 3}


async def test_browser_registrations_never_push_out_backend_instances(
    make_client: MakeClient,
) -> None:
    """1,001 registrations through the public frontend key, each naming another instance of
    a backend application: they are kept as that application's one ``browser`` instance,
    and the backend SDK's instance stays (before: it was pushed out by them)."""
    client = await make_client(init_frontend_api_tokens=[FRONT_KEY])
    backend = {"appName": "shop", "instanceId": "pod-1", "sdkVersion": "unleash-client-node:6"}
    posted = await client.post("/api/client/register", json=backend, headers=auth(DEV_KEY))
    assert posted.status == 202
    for n in range(1001):
        body = {"appName": "shop", "instanceId": f"made-up-{n}", "sdkVersion": "x"}
        posted = await client.post(
            "/api/frontend/client/register", json=body, headers=auth(FRONT_KEY)
        )
        assert posted.status == 202
    path = "/api/admin/metrics/applications/shop?limit=2000"
    body = await (await client.get(path, headers=auth(ADMIN_KEY))).json()
    assert sorted(i["instanceId"] for i in body["instances"]) == ["browser", "pod-1"]
