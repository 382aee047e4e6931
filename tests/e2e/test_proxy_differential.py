"""``relay proxy`` beside the real Unleash Proxy (npm ``@unleash/proxy`` 1.4.19, real_proxy.py),
both started from the same environment variables against one real standalone holding the
flags of test_flags_sdk.py and more (segments, a dependency, flag and strategy variants with
payloads and overrides, address, host, app and environment constraints, dates, impression
data): for hundreds of contexts, by ``GET`` and ``POST``, on ``/proxy``, ``/proxy/all`` and
with toggles named, both answer the same toggles, in the same order, with the same variants.
And what else a caller meets alike: the statuses of a missing, a wrong and a ``Bearer`` key,
of a wrong content type, an ETag sent back, a preflight.

Contexts always carry a ``sessionId`` and a ``remoteAddress``: without one, the Proxy draws a
random session (so does relay), and sees an IPv4 caller of its dual-stack socket as
``::ffff:127.0.0.1``, which no address strategy matches (relay sees ``127.0.0.1``).
"""

from __future__ import annotations

import json
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import ADMIN_KEY, DEV_KEY
from flagkit import FEATURES, env_path, feature_path, http
from flagstate import STRATEGIES, build_state
from real_proxy import proxy_modules, real_proxy
from service import Service, running, start

pytestmark = pytest.mark.process

KEY = "browser-key"
CENTRAL_ENV = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}
PAYLOAD = {"type": "json", "value": '{"plan": "gold"}'}

MORE: dict[str, list[dict[str, Any]]] = {
    "vip": [
        {
            "name": "default",
            "constraints": [{"contextName": "userId", "operator": "IN", "values": ["alice", "3"]}],
        }
    ],
    "office": [{"name": "remoteAddress", "parameters": {"IPs": "10.0.0.0/8, 192.168.1.1"}}],
    "this-host": [
        {"name": "applicationHostname", "parameters": {"hostNames": socket.gethostname()}}
    ],
    "by-plan": [
        {
            "name": "default",
            "constraints": [{"contextName": "plan", "operator": "IN", "values": ["gold"]}],
        }
    ],
    "by-session": [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "50", "stickiness": "sessionId", "groupId": "by-session"},
        }
    ],
    "by-app": [
        {
            "name": "default",
            "constraints": [
                {"contextName": "appName", "operator": "IN", "values": ["unleash-proxy"]}
            ],
        }
    ],
    "in-production": [
        {
            "name": "default",
            "constraints": [
                {"contextName": "environment", "operator": "IN", "values": ["production"]}
            ],
        }
    ],
    "default-stickiness": [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "40", "stickiness": "default", "groupId": "sticky"},
            "variants": [
                {"name": n, "weight": 500, "weightType": "variable", "stickiness": "default"}
                for n in ("left", "right")
            ],
        }
    ],
    "before-2021": [
        {
            "name": "default",
            "constraints": [
                {
                    "contextName": "currentTime",
                    "operator": "DATE_BEFORE",
                    "value": "2021-01-01T00:00:00.000Z",
                }
            ],
        }
    ],
    "flag-variants": [{"name": "flexibleRollout", "parameters": {"rollout": "80"}}],
    "child": [{"name": "default"}],
    "loud": [],
}
FLAG_VARIANTS = [
    {
        "name": "gold",
        "weight": 200,
        "weightType": "variable",
        "stickiness": "default",
        "payload": PAYLOAD,
        "overrides": [{"contextName": "plan", "values": ["gold"]}],
    },
    {"name": "silver", "weight": 300, "weightType": "variable", "stickiness": "default"},
    {"name": "bronze", "weight": 500, "weightType": "variable", "stickiness": "default"},
]
NAMED = ["child", "off", "rollout", "no-such-flag", "variants", "child"]


def build(url: str) -> None:
    """The flags of test_flags_sdk.py and MORE, through a standalone's admin API."""
    build_state(url)
    for name, strategies in MORE.items():
        body = {"name": name, **({"impressionData": True} if name == "loud" else {})}
        assert http("POST", f"{url}{FEATURES.format(project='default')}", body)[0] == 201
        for strategy in strategies:
            status, answer = http("POST", f"{url}{env_path(name)}/strategies", strategy)
            assert status == 200, answer
        assert http("POST", f"{url}{env_path(name)}/on")[0] == 200
    batch = {"variants": FLAG_VARIANTS, "environments": ["development"]}
    status, answer = http("PUT", f"{url}{feature_path('flag-variants')}/variants-batch", batch)
    assert status == 200, answer
    parent = {"feature": "default-stickiness", "variants": ["left"]}
    status, answer = http("POST", f"{url}{feature_path('child')}/dependencies", parent)
    assert status == 200, answer


ADDRESSES = ["10.1.2.3", "192.168.1.1", "127.0.0.1", "8.8.8.8", "192.168.1.2"]
TIMES = ["2019-06-01T00:00:00.000Z", "2021-06-01T00:00:00.000Z", "2020-12-31", "not a date"]
VERSIONS = ["1.9.9", "1.10.0", "1.10.0-rc.1"]


def contexts(count: int = 240) -> list[dict[str, Any]]:
    """Contexts of users, sessions, addresses, properties (under ``properties`` and at the
    top), app names, environments and times, varied together."""
    found: list[dict[str, Any]] = []
    for i in range(count):
        user = "alice" if i % 17 == 0 else str(i)
        context: dict[str, Any] = {
            "userId": user,
            "sessionId": f"session-{i * 7}",
            "remoteAddress": ADDRESSES[i % len(ADDRESSES)],
        }
        if i % 3 == 0:
            context["properties"] = {
                "email": "ADMIN@shop.io" if i % 2 else "someone@shop.io",
                "age": str(10 + i % 20),
                "appVersion": VERSIONS[(i // 3) % 3],
            }
        if i % 4 == 1:
            context["plan"] = "gold"  # a top-level key: a property
        if i % 5 == 2:
            context["currentTime"] = TIMES[(i // 5) % len(TIMES)]
        if i % 7 == 3:
            context["appName"] = "shop"
        if i % 11 == 4:
            context["environment"] = "production"
        if i % 13 == 5:
            context["userId"] = ""  # empty: absent, the session decides
        found.append(context)
    return found


def query(context: dict[str, Any]) -> str:
    """A context as the browser SDK puts it in the query: ``properties[name]=value``."""
    pairs = [(k, v) for k, v in context.items() if k != "properties"]
    pairs += [(f"properties[{k}]", v) for k, v in context.get("properties", {}).items()]
    return urlencode(pairs)


def compared(toggles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The toggles as an SDK reads them. ``featureEnabled`` (the deprecated spelling) is left
    out: the Proxy leaves it out of a disabled toggle's variant in ``/all``, relay has it."""
    return [
        {**t, "variant": {k: v for k, v in t["variant"].items() if k != "featureEnabled"}}
        for t in toggles
    ]


def answers(service: Service, context: dict[str, Any]) -> dict[str, Any]:
    """What ``service`` answers for ``context`` on each path and method."""
    found: dict[str, Any] = {}
    for path in ("/proxy", "/proxy/all"):
        status, body = http("GET", f"{service.url}{path}?{query(context)}", key=KEY)
        found[f"GET {path}"] = (status, compared(body["toggles"]))
        status, body = http("POST", f"{service.url}{path}", {"context": context}, KEY)
        found[f"POST {path}"] = (status, compared(body["toggles"]))
    status, body = http("POST", f"{service.url}/proxy", {"context": context, "toggles": NAMED}, KEY)
    found["POST /proxy toggles"] = (status, compared(body["toggles"]))
    return found


def status_of(
    url: str, headers: dict[str, str], method: str = "GET", body: bytes | None = None
) -> int:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
            return int(answer.status)
    except urllib.error.HTTPError as error:
        with error:
            return error.code


def meetings(service: Service) -> dict[str, Any]:
    """What else a caller meets: statuses of keys and bodies, an ETag sent back, a
    preflight's verdict."""
    url = f"{service.url}/proxy"
    with urllib.request.urlopen(
        urllib.request.Request(f"{url}?userId=1&sessionId=s", headers={"Authorization": KEY})
    ) as answer:
        etag = answer.headers["ETag"]
        cache = answer.headers["Cache-Control"]
    preflight = urllib.request.Request(
        url,
        method="OPTIONS",
        headers={
            "Origin": "http://shop.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization,unleash-sdk",
        },
    )
    with urllib.request.urlopen(preflight) as answer:
        cors = {
            name: answer.headers.get(name)
            for name in (
                "Access-Control-Allow-Origin",
                "Access-Control-Allow-Methods",
                "Access-Control-Allow-Headers",
                "Access-Control-Max-Age",
            )
        }
        cors["status"] = answer.status
    body = json.dumps({"context": {}}).encode()
    return {
        "etag is weak": etag.startswith('W/"'),
        "cache": cache,
        "etag sent back": status_of(
            f"{url}?userId=1&sessionId=s", {"Authorization": KEY, "If-None-Match": etag}
        ),
        "no key": status_of(url, {}),
        "wrong key": status_of(url, {"Authorization": "nope"}),
        "bearer key": status_of(url, {"Authorization": f"Bearer {KEY}"}),
        "the upstream's key": status_of(url, {"Authorization": DEV_KEY}),
        "text body": status_of(
            url, {"Authorization": KEY, "Content-Type": "text/plain"}, "POST", body
        ),
        "broken body": status_of(
            url, {"Authorization": KEY, "Content-Type": "application/json"}, "POST", b'{"context": '
        ),
        "health": status_of(f"{url}/health", {}),
        "preflight": cors,
    }


def test_relay_proxy_answers_as_the_real_proxy(tmp_path: Path) -> None:
    modules = proxy_modules()
    with running(tmp_path / "central", env=CENTRAL_ENV, name="central") as central:
        build(central.url)
        env = {
            "UNLEASH_URL": f"{central.url}/api/",
            "UNLEASH_API_TOKEN": DEV_KEY,
            "UNLEASH_PROXY_CLIENT_KEYS": f"{KEY},another",
            "ENABLE_ALL_ENDPOINT": "true",
        }
        theirs = real_proxy(modules, tmp_path / "proxy", env)
        try:
            ours = start(
                tmp_path / "relay",
                "proxy",
                env={**env, "RELAY_WORKERS": "auto"},
                name="relay-proxy",
                wait_for="/proxy/health",
                program=(sys.executable, "-m", "relay"),
            )
            try:
                differences: list[str] = []
                compared_toggles = 0
                every = contexts()
                enabled: set[str] = set()
                for context in every:
                    mine, its = answers(ours, context), answers(theirs, context)
                    enabled |= {t["name"] for t in its["GET /proxy"][1]}
                    for what in its:
                        compared_toggles += len(its[what][1])
                        if mine[what] != its[what]:
                            differences.append(
                                f"{what} {context}:\n  Proxy {its[what]}\n  ours  {mine[what]}"
                            )
                met = {"ours": meetings(ours), "theirs": meetings(theirs)}
            finally:
                ours.close()
        finally:
            theirs.close()
    assert not differences, f"{len(differences)} differ:\n" + "\n".join(differences[:20])
    assert met["ours"] == met["theirs"], met
    assert len(every) >= 200 and compared_toggles > 10_000, compared_toggles
    # every flag but "off" was on for some context: the comparison covered each
    assert enabled == {*STRATEGIES, "segment", *MORE} - {"off"}, enabled
    print(f"{compared_toggles} toggles alike over {len(every)} contexts, 5 answers each")
