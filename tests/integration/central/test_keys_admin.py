"""Keys listed and revoked (issue 17): the admin API in Unleash's shapes, on both backends,
across instances sharing one database, and the command line."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from clikit import relay
from conftest import ADMIN_KEY, DEV_KEY, MakeClient, assert_error, auth
from service import eventually

TOKENS = "/api/admin/api-tokens"


async def create(client: Any, **body: Any) -> dict[str, Any]:
    response = await client.post(TOKENS, json=body, headers=auth(ADMIN_KEY))
    assert response.status == 201, await response.text()
    created: dict[str, Any] = await response.json()
    return created


async def listed(client: Any) -> list[dict[str, Any]]:
    response = await client.get(TOKENS, headers=auth(ADMIN_KEY))
    assert response.status == 200, await response.text()
    tokens: list[dict[str, Any]] = (await response.json())["tokens"]
    return tokens


async def ingest_status(client: Any, key: str) -> int:
    body = {"applications": [], "metrics": []}
    response = await client.post("/api/client/metrics/bulk", json=body, headers=auth(key))
    return response.status


async def test_keys_are_listed_without_their_secret(client: Any) -> None:
    before = time.time()
    made = await create(
        client, type="client", environment="production", projects=["default"], tokenName="shop"
    )
    assert made["secret"].startswith("default:production.") and len(made["id"]) == 16
    tokens = await listed(client)
    text = str(tokens)
    assert made["secret"] not in text and DEV_KEY not in text and ADMIN_KEY not in text
    mine = next(t for t in tokens if t["id"] == made["id"])
    assert mine == {
        "id": made["id"],
        "secret": "default:production.****",
        "tokenName": "shop",
        "type": "client",
        "environment": "production",
        "projects": ["default"],
        "project": "default",
        "createdAt": mine["createdAt"],
        "seenAt": None,
    }
    assert await ingest_status(client, made["secret"]) == 202
    seen = next(t for t in await listed(client) if t["id"] == made["id"])["seenAt"]
    assert seen is not None and seen >= time.strftime("%Y-%m-%dT%H:%M", time.gmtime(before))
    admin = next(t for t in tokens if t["type"] == "admin")
    assert admin["secret"] == "*:*.****" and admin["environment"] == "*"


async def test_a_revoked_key_stops_working_at_once(client: Any) -> None:
    made = await create(client, type="client", environment="development", tokenName="gone")
    assert await ingest_status(client, made["secret"]) == 202
    response = await client.delete(f"{TOKENS}/{made['id']}", headers=auth(ADMIN_KEY))
    assert response.status == 200, await response.text()
    assert await ingest_status(client, made["secret"]) == 401
    assert made["id"] not in {t["id"] for t in await listed(client)}
    again = await client.delete(f"{TOKENS}/{made['id']}", headers=auth(ADMIN_KEY))
    assert again.status == 404
    assert_error(await again.json(), "NotFoundError")


async def test_revoke_by_name_and_an_ambiguous_name(client: Any) -> None:
    one = await create(client, type="client", environment="development", tokenName="ci")
    await create(client, type="client", environment="development", tokenName="ci")
    ambiguous = await client.delete(f"{TOKENS}/ci", headers=auth(ADMIN_KEY))
    assert ambiguous.status == 409
    assert "revoke by id" in (await ambiguous.json())["message"]
    assert await ingest_status(client, one["secret"]) == 202  # nothing was revoked
    named = await create(client, type="client", environment="production", tokenName="batch")
    assert (await client.delete(f"{TOKENS}/batch", headers=auth(ADMIN_KEY))).status == 200
    assert await ingest_status(client, named["secret"]) == 401


async def test_only_admin_keys_list_or_revoke(client: Any) -> None:
    assert (await client.get(TOKENS, headers=auth(DEV_KEY))).status == 403
    assert (await client.get(TOKENS)).status == 401
    assert (await client.delete(f"{TOKENS}/x", headers=auth(DEV_KEY))).status == 403


async def test_revoked_on_one_instance_is_refused_by_another_within_seconds(
    make_client: MakeClient, tmp_path: Path
) -> None:
    """Two instances on one database (a SQLite file shared like two workers, or one
    PostgreSQL database): the second has the key in memory, and drops it at its next poll
    of the key revision; its last use reaches the first through the database."""
    first = await make_client(tmp_path / "shared")
    second = await make_client(tmp_path / "shared")
    made = await create(first, type="client", environment="development")
    assert await ingest_status(second, made["secret"]) == 202  # now cached by the second

    async def seen_by_first() -> bool:
        mine = next(t for t in await listed(first) if t["id"] == made["id"])
        return mine["seenAt"] is not None

    await eventually(seen_by_first, "the second instance wrote the key's last use", within=20)
    revoked = await first.delete(f"{TOKENS}/{made['id']}", headers=auth(ADMIN_KEY))
    assert revoked.status == 200
    started = time.monotonic()

    async def refused() -> bool:
        return await ingest_status(second, made["secret"]) == 401

    await eventually(refused, "the second instance refuses the revoked key", within=20)
    assert time.monotonic() - started < 5  # docs/standalone.md: within about 2 s


@pytest.mark.process
def test_keys_list_and_revoke_commands(tmp_path: Path) -> None:
    made = relay(
        "keys",
        "create",
        "--type",
        "client",
        "--environment",
        "development",
        "--name",
        "cli-key",
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    listing = relay("keys", "list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    line = next(row for row in listing.stdout.splitlines() if "cli-key" in row)
    key_id, kind, projects, environment, name, display, *_ = line.split("\t")
    assert (kind, projects, environment, name) == ("client", "*", "development", "cli-key")
    assert display == "[]:development.****" or display.endswith(":development.****")
    assert secret not in listing.stdout and "used never" in line
    revoked = relay("keys", "revoke", key_id, cwd=tmp_path)
    assert revoked.returncode == 0, revoked.stderr
    assert key_id in revoked.stdout and secret not in revoked.stdout
    assert "cli-key" not in relay("keys", "list", cwd=tmp_path).stdout
    missing = relay("keys", "revoke", key_id, cwd=tmp_path)
    assert missing.returncode == 2 and "No API key" in missing.stderr
