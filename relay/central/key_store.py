"""API keys of the central service, stored only as SHA-256 hashes (see ``relay.core.keys``),
on either backend."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from relay.core.keys import KeySpec, Principal, hash_key
from relay.store.sql import Database, Row
from relay.wire.common import KeyType

_COLUMNS = "secret_hash, display, type, environment, projects, token_name"


class KeyStore:
    """Resolves presented keys. Every valid key is held in memory once loaded (``load`` at
    start, then each key created or found), since keys are read on every request and are
    few; ``known`` answers from there, so callers with valid keys pass the per-address
    limit of failures (``relay.api.throttle``) untouched. A key created by another instance
    sharing the database is found on its first use."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cache: dict[str, Principal] = {}

    async def load(self) -> None:
        for row in await self._db.fetch_all(f"SELECT {_COLUMNS} FROM api_tokens"):
            self._cache[row["secret_hash"]] = _principal(row)

    def known(self, key: str) -> Principal | None:
        return self._cache.get(hash_key(key))

    async def resolve(self, key: str) -> Principal | None:
        return (await self.resolve_many([key]))[key]

    async def resolve_many(self, keys: Sequence[str]) -> dict[str, Principal | None]:
        """One lookup for the keys not in memory."""
        digests = {key: hash_key(key) for key in keys}
        missing = sorted({d for d in digests.values() if d not in self._cache})
        if missing:
            marks = ", ".join("?" * len(missing))
            rows = await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM api_tokens WHERE secret_hash IN ({marks})", missing
            )
            for row in rows:
                self._cache[row["secret_hash"]] = _principal(row)
        return {key: self._cache.get(digest) for key, digest in digests.items()}

    async def add(self, spec: KeySpec) -> bool:
        """Store a key unless it exists; True when it was created."""
        p = spec.principal
        digest = hash_key(spec.secret)
        async with self._db.transaction() as tx:
            created = await tx.execute(
                "INSERT INTO api_tokens (secret_hash, display, type, environment, projects,"
                " token_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (secret_hash) DO NOTHING",
                (
                    digest,
                    p.display,
                    p.type.value,
                    p.environment,
                    json.dumps(list(p.projects)),
                    p.token_name,
                    time.time(),
                ),
            )
        if created == 1:
            self._cache[digest] = p
        return created == 1

    async def count(self) -> int:
        row = await self._db.fetch_one("SELECT count(*) AS n FROM api_tokens")
        return int(row["n"]) if row is not None else 0


def _principal(row: Row) -> Principal:
    return Principal(
        type=KeyType(row["type"]),
        environment=row["environment"],
        projects=tuple(json.loads(row["projects"])),
        display=row["display"],
        token_name=row["token_name"],
    )
