"""Flag admin and client calls the flag tests share, against an app client (aiohttp's test
client on a real socket) with the test keys of conftest.py."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, auth

FEATURES = "/api/admin/projects/{project}/features"


def feature_path(name: str, project: str = "default") -> str:
    return f"{FEATURES.format(project=project)}/{name}"


def env_path(name: str, env: str = "development", project: str = "default") -> str:
    return f"{feature_path(name, project)}/environments/{env}"


async def call(
    client: Any, method: str, path: str, body: Any = None, key: str = ADMIN_KEY
) -> tuple[int, Any]:
    """(status, JSON body or None) of one admin call."""
    response = await client.request(method, path, json=body, headers=auth(key))
    raw = await response.read()
    return response.status, (await response.json() if raw else None)


async def ok(client: Any, method: str, path: str, body: Any = None, status: int = 200) -> Any:
    got, answer = await call(client, method, path, body)
    assert got == status, (method, path, got, answer)
    return answer


async def create_flag(client: Any, name: str, project: str = "default", **fields: Any) -> Any:
    body = {"name": name, **fields}
    return await ok(client, "POST", FEATURES.format(project=project), body, status=201)


async def turn(
    client: Any, name: str, on: bool = True, env: str = "development", **kw: Any
) -> None:
    await ok(client, "POST", f"{env_path(name, env, **kw)}/{'on' if on else 'off'}")


async def add_strategy(
    client: Any, name: str, strategy: dict[str, Any], env: str = "development", **kw: Any
) -> Any:
    return await ok(client, "POST", f"{env_path(name, env, **kw)}/strategies", strategy)


async def client_features(
    client: Any,
    key: str = DEV_KEY,
    query: str = "",
    spec: str | None = "5.1.9",
    etag: str | None = None,
) -> tuple[int, Any, str]:
    """(status, body or None, ETag) of ``GET /api/client/features`` as an SDK calls it."""
    headers = auth(key)
    if spec is not None:
        headers["Unleash-Client-Spec"] = spec
    if etag is not None:
        headers["If-None-Match"] = etag
    response = await client.get(f"/api/client/features{query}", headers=headers)
    raw = await response.read()
    body = await response.json() if raw else None
    return response.status, body, response.headers.get("ETag", "")


async def served(client: Any, key: str = DEV_KEY, **kw: Any) -> dict[str, Any]:
    """name -> feature of what the key sees."""
    status, body, _ = await client_features(client, key, **kw)
    assert status == 200, body
    return {f["name"]: f for f in body["features"]}


def rollout(percent: int, **parameters: str) -> dict[str, Any]:
    return {
        "name": "flexibleRollout",
        "parameters": {"rollout": str(percent), "stickiness": "default", **parameters},
    }


def even_variants(payloads: dict[str, Any]) -> list[dict[str, Any]]:
    """One variant per payload, all of one weight, sticky on ``userId``."""
    return [
        {
            "name": name,
            "weight": 500,
            "weightType": "variable",
            "stickiness": "userId",
            "payload": payload,
        }
        for name, payload in payloads.items()
    ]


def http(
    method: str,
    url: str,
    body: Any = None,
    key: str = ADMIN_KEY,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """(status, JSON body or None) of one call to a service running as a process."""
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": key, "Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        with exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw else None
