"""Our Frontend API beside a real Unleash's (real_unleash.py; opt-in: ``TEST_UNLEASH_SERVER=1``):
the same flags configured in both through the admin API, a frontend key made in each, and
``GET`` and ``POST /api/frontend`` asked for the same contexts (users, properties, given
addresses, unknown top-level keys, a caller's ``currentTime``): the same toggles, the same
variants, the same payloads, in both answers; and what else a browser SDK meets alike (a
preflight, its metrics accepted, the statuses of a missing key and of a client key).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import ADMIN_KEY, DEV_KEY
from flagkit import FEATURES, env_path, http
from flagstate import STRATEGIES, build_state
from real_unleash import real_unleash
from service import Service, running, wait_until

pytestmark = pytest.mark.process

CENTRAL_ENV = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}

# flags beyond those of test_flags_sdk.py: the strategies a browser's context decides
MORE: dict[str, dict[str, Any]] = {
    # (Unleash 8.2 has no userWithId strategy for new flags: "Could not find strategy type")
    "vip": {
        "name": "default",
        "constraints": [{"contextName": "userId", "operator": "IN", "values": ["alice", "3"]}],
    },
    "office": {"name": "remoteAddress", "parameters": {"IPs": "10.0.0.0/8, 192.168.1.1"}},
    "here": {"name": "remoteAddress", "parameters": {"IPs": "127.0.0.1"}},
    "this-host": {"name": "applicationHostname", "parameters": {"hostNames": socket.gethostname()}},
    "by-plan": {
        "name": "default",
        "constraints": [{"contextName": "plan", "operator": "IN", "values": ["gold"]}],
    },
    # Unleash draws a random sessionId for a context without one (so do we): this flag is
    # compared only for contexts that give one
    "by-session": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "50", "stickiness": "sessionId", "groupId": "by-session"},
    },
}

CONTEXTS: list[dict[str, Any]] = [
    {},
    {"userId": "1"},
    {"userId": "7"},
    {"userId": "", "sessionId": ""},
    {"userId": "alice", "properties": {"email": "ADMIN@shop.io"}},
    {"userId": "2", "properties": {"age": "18", "appVersion": "1.10.0"}},
    {"userId": "3", "properties": {"age": "17.5", "appVersion": "1.10.0-rc.1"}},
    {"userId": "4", "remoteAddress": "10.1.2.3"},
    {"userId": "5", "remoteAddress": "192.168.1.1", "sessionId": "s-1"},
    {"userId": "6", "currentTime": "2019-06-01T00:00:00.000Z"},
    {"userId": "8", "plan": "gold"},
    {"userId": "9", "properties": {"plan": "gold"}, "appName": "shop", "environment": "prod"},
    *({"userId": str(user), "sessionId": f"s-{user}"} for user in range(100, 120)),
]


def build(url: str) -> str:
    """The flags, and a frontend key of development: its secret."""
    build_state(url)
    for name, strategy in MORE.items():
        assert http("POST", f"{url}{FEATURES.format(project='default')}", {"name": name})[0] == 201
        status, answer = http("POST", f"{url}{env_path(name)}/strategies", strategy)
        assert status == 200, answer
        assert http("POST", f"{url}{env_path(name)}/on")[0] == 200
    loud = {"name": "loud", "impressionData": True}
    assert http("POST", f"{url}{FEATURES.format(project='default')}", loud)[0] == 201
    assert http("POST", f"{url}{env_path('loud')}/on")[0] == 200
    key = {
        "type": "frontend",
        "environment": "development",
        "projects": ["default"],
        "tokenName": "shop-web",
    }
    status, made = http("POST", f"{url}/api/admin/api-tokens", key)
    assert status == 201, made
    secret: str = made["secret"]
    return secret


def query(context: dict[str, Any]) -> str:
    """A context as the browser SDK puts it in the query: ``properties[name]=value``."""
    pairs = [(k, v) for k, v in context.items() if k != "properties"]
    pairs += [(f"properties[{k}]", v) for k, v in context.get("properties", {}).items()]
    return urlencode(pairs)


def toggles(service: Service, key: str, context: dict[str, Any], post: bool) -> dict[str, Any]:
    """name -> toggle of what ``service`` answers for ``context``."""
    if post:
        status, body = http("POST", f"{service.url}/api/frontend", {"context": context}, key)
    else:
        status, body = http("GET", f"{service.url}/api/frontend?{query(context)}", key=key)
    assert status == 200, body
    return {toggle["name"]: toggle for toggle in body["toggles"]}


SDK_HEADERS = {"authorization", "unleash-sdk", "unleash-appname", "unleash-connection-id"}


def browser_calls(service: Service, key: str) -> dict[str, Any]:
    """What a browser SDK meets besides the flags: a preflight's verdict for its headers,
    its metrics accepted (any 2xx), and the statuses of no key and of a client key."""
    preflight = urllib.request.Request(
        f"{service.url}/api/frontend",
        method="OPTIONS",
        headers={
            "Origin": "http://shop.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": ",".join(sorted(SDK_HEADERS)),
        },
    )
    with urllib.request.urlopen(preflight, timeout=10) as answer:
        allowed = answer.headers.get("Access-Control-Allow-Headers", "").lower()
        cors = (
            answer.status,
            answer.headers.get("Access-Control-Allow-Origin"),
            {header.strip() for header in allowed.split(",")} >= SDK_HEADERS,
            answer.headers.get("Access-Control-Expose-Headers"),
        )
    now = datetime.now(UTC).isoformat()
    bucket = {"start": now, "stop": now, "toggles": {"on": {"yes": 1, "no": 0, "variants": {}}}}
    metrics = {"appName": "shop-web", "instanceId": "browser", "bucket": bucket}
    url = f"{service.url}/api/frontend"
    return {
        "preflight": cors,
        "metrics": status_of(f"{url}/client/metrics", key, metrics) // 100,
        "no key": status_of(url, ""),
        "client key": status_of(url, DEV_KEY),
    }


def status_of(url: str, key: str, body: Any = None) -> int:
    """The status of a call whose body is not read (Unleash answers metrics with ``OK``)."""
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code


def compare(
    unleash: tuple[Service, str], ours: tuple[Service, str]
) -> tuple[list[str], set[str], int]:
    """Both answers to every context, by ``GET`` and ``POST``: the differences, the flags
    Unleash answered for some context, and how many toggles were compared."""
    differences: list[str] = []
    seen: set[str] = set()
    compared = 0
    for context in CONTEXTS:
        for method in ("GET", "POST"):
            theirs = toggles(*unleash, context, method == "POST")
            mine = toggles(*ours, context, method == "POST")
            seen |= theirs.keys()
            for name in sorted(theirs.keys() | mine.keys()):
                if name == "by-session" and not context.get("sessionId"):
                    continue
                compared += 1
                if (one := theirs.get(name)) != (other := mine.get(name)):
                    differences.append(f"{method} {context}: {name}: Unleash {one}, ours {other}")
    return differences, seen, compared


def test_our_frontend_api_answers_as_unleash_does(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    with (
        real_unleash(request, tmp_path / "unleash") as run,
        running(tmp_path / "central", env=CENTRAL_ENV, name="standalone") as central,
    ):
        service = run(None)
        try:
            unleash, ours = (service, build(service.url)), (central, build(central.url))
            # Unleash's frontend API serves from a cache of its own: until it has the flags
            wait_until(
                lambda: toggles(*unleash, {}, False).keys() == toggles(*ours, {}, False).keys(),
                "Unleash's frontend API has the flags",
            )
            differences, seen, compared = compare(unleash, ours)
            calls = {"unleash": browser_calls(*unleash), "ours": browser_calls(*ours)}
        finally:
            service.close()
    assert not differences, "\n".join(differences)
    assert calls["ours"] == calls["unleash"], calls
    print(f"{compared} toggles alike in {2 * len(CONTEXTS)} answers of each")
    # every flag but "off" was on for some context: the comparison covered each
    assert seen == {*STRATEGIES, "segment", *MORE, "loud"} - {"off"}, seen
