"""API keys of the central service, stored only as SHA-256 hashes (see ``relay.core.keys``),
on either backend."""

from __future__ import annotations

import json
import time

from relay.core.keys import KeySpec, Principal, hash_key
from relay.store.sql import Database
from relay.wire.common import KeyType


class KeyStore:
    """Resolves presented keys; caches hits, since keys are read on every request."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cache: dict[str, Principal] = {}

    async def resolve(self, key: str) -> Principal | None:
        digest = hash_key(key)
        cached = self._cache.get(digest)
        if cached is not None:
            return cached
        row = await self._db.fetch_one(
            "SELECT display, type, environment, projects, token_name"
            " FROM api_tokens WHERE secret_hash = ?",
            (digest,),
        )
        if row is None:
            return None
        principal = Principal(
            type=KeyType(row["type"]),
            environment=row["environment"],
            projects=tuple(json.loads(row["projects"])),
            display=row["display"],
            token_name=row["token_name"],
        )
        self._cache[digest] = principal
        return principal

    async def add(self, spec: KeySpec) -> bool:
        """Store a key unless it exists; True when it was created."""
        p = spec.principal
        async with self._db.transaction() as tx:
            created = await tx.execute(
                "INSERT INTO api_tokens (secret_hash, display, type, environment, projects,"
                " token_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (secret_hash) DO NOTHING",
                (
                    hash_key(spec.secret),
                    p.display,
                    p.type.value,
                    p.environment,
                    json.dumps(list(p.projects)),
                    p.token_name,
                    time.time(),
                ),
            )
            return created == 1

    async def count(self) -> int:
        row = await self._db.fetch_one("SELECT count(*) AS n FROM api_tokens")
        return int(row["n"]) if row is not None else 0
