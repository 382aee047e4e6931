"""What the OFREP tests share: keys, the flags of every kind they read (``build``), and an
OFREP call as the providers make it (``evaluate``).

Expected values come from the flags' configuration (Unleash's MurmurHash3 bucketing in
``sdks.bucket``), never from our evaluator.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from conftest import standalone_settings
from flagkit import add_strategy, create_flag, feature_path, http, ok, rollout, turn
from sdks import VARIANT_SEED, bucket
from service import Service, wait_until

from relay.app import build_app

FRONT = "default:development.ofrep-front-secret-0123456789"
OTHER_FRONT = "other:development.ofrep-other-front-secret-012345"
BULK = "/ofrep/v1/evaluate/flags"
USERS = [f"user-{n}" for n in range(40)]


def one_path(name: str) -> str:
    return f"{BULK}/{name}"


def variant(name: str, kind: str | None = None, value: str = "", **more: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "weight": 500, "weightType": "variable"}
    found["stickiness"] = "default"
    if kind is not None:
        found["payload"] = {"type": kind, "value": value}
    return found | more


async def standalone(aiohttp_client: Any, data_dir: Path, **settings: Any) -> Any:
    """A standalone (SQLite) on a real socket with a frontend key of project default and
    one of project other, both in development, and the flags of ``build``."""
    keys = [FRONT, OTHER_FRONT]
    app = build_app(standalone_settings(data_dir, init_frontend_api_tokens=keys, **settings))
    client = await aiohttp_client(app)
    await build(client)
    return client


async def build(client: Any) -> None:
    await ok(client, "POST", "/api/admin/projects", {"id": "other", "name": "other"}, 201)
    await ok(
        client, "POST", "/api/admin/projects/other/environments", {"environment": "development"}
    )
    for name in ("on", "off", "vip", "half", "split", "typed", "numbers", "broken", "json-nan"):
        await create_flag(client, name)
    await create_flag(client, "elsewhere", project="other")
    await turn(client, "elsewhere", project="other")
    await add_strategy(client, "vip", {"name": "userWithId", "parameters": {"userIds": "alice"}})
    await add_strategy(client, "half", rollout(50, stickiness="userId", groupId="half"))
    # variants without payloads: a boolean flag, its variant named
    split = rollout(100, groupId="split")
    split["variants"] = [variant("left"), variant("right")]
    await add_strategy(client, "split", split)
    # a typed flag (its own variants): a string for plan gold (an override), else a json
    # document or csv by weight
    await add_strategy(client, "typed", rollout(100, groupId="typed"))
    own = [
        variant("doc", "json", '{"colour": "#00f", "sizes": [1, 2]}'),
        variant("list", "csv", "a,b,c"),
        variant("gold", "string", "gilded", weight=0, weightType="fix", overrides=[_plan("gold")]),
    ]
    pushed = {"variants": own, "environments": ["development"]}
    await ok(client, "PUT", f"{feature_path('typed')}/variants-batch", pushed)
    numbers = {"name": "default", "constraints": [_in("plan", "int")]}
    numbers["variants"] = [variant("n", "number", "42", weight=1000)]
    await add_strategy(client, "numbers", numbers)
    floats = {"name": "default", "variants": [variant("f", "number", " -2.5e3 ", weight=1000)]}
    await add_strategy(client, "numbers", floats)
    bad = {"name": "default", "variants": [variant("b", "number", "forty-two", weight=1000)]}
    await add_strategy(client, "broken", bad)
    nan = {"name": "default", "variants": [variant("x", "json", "NaN", weight=1000)]}
    await add_strategy(client, "json-nan", nan)
    for name in ("on", "vip", "half", "split", "typed", "numbers", "broken", "json-nan"):
        await turn(client, name)


def _in(context_name: str, *values: str) -> dict[str, Any]:
    return {"contextName": context_name, "operator": "IN", "values": list(values)}


def _plan(plan: str) -> dict[str, Any]:
    return {"contextName": "plan", "values": [plan]}


async def evaluate(
    client: Any,
    path: str = BULK,
    context: Any = None,
    key: str | None = FRONT,
    headers: dict[str, str] | None = None,
    body: Any = None,
) -> tuple[int, Any, Any]:
    """(status, JSON body or None, headers) of an OFREP call, as the providers make it."""
    sent = {"context": context if context is not None else {}} if body is None else body
    given = {"Content-Type": "application/json; charset=utf-8"}
    if key is not None:
        given["Authorization"] = key
    data = sent if isinstance(sent, bytes) else json.dumps(sent).encode()
    response = await client.post(path, data=data, headers=given | (headers or {}))
    raw_body = await response.read()
    return response.status, (json.loads(raw_body) if raw_body else None), response.headers


def by_key(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {flag.pop("key"): flag for flag in body["flags"]}


def colour_of(user: str) -> str:
    """doc or list: the typed flag's variant by weight (500 each), as every SDK hashes (a
    flag's own variants: by its name)."""
    return "doc" if bucket("typed", user, 1000, VARIANT_SEED) <= 500 else "list"


def every_worker_answers(relay: Service, key: str) -> None:
    """Waits until each of the relay's workers (its default count) answered an OFREP
    evaluation from its copy: they share copies through cache.db within two ticks
    (docs/relays.md), and one started just before the upstream left may not have it yet.
    Each request is a new connection; the access log names the worker that answered."""
    said = re.search(r'"workers: (\d+)', relay.logs())
    assert said is not None, "the relay says how many workers it runs"
    workers = int(said.group(1))
    since = len(relay.logs())

    def answered() -> bool:
        http("POST", f"{relay.url}/ofrep/v1/evaluate/flags", {"context": {}}, key)
        lines = [json.loads(line) for line in relay.logs()[since:].splitlines() if line]
        return {
            line.get("worker")
            for line in lines
            if line.get("route") == "/ofrep/v1/evaluate/flags" and line.get("status") == 200
        } == set(range(workers))

    wait_until(answered, f"each of {workers} workers answered from its copy")


def readme_example(name: str, url: str) -> str:
    """The README's OpenFeature example marked ``<!-- run: NAME -->``, calling ``url``."""
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    found = re.search(rf"<!-- run: {name} -->\n```\w+\n(.+?)\n```", readme, re.S)
    assert found, name
    return found.group(1).replace("http://localhost:4242", url)
