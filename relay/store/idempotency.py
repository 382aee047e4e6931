"""Idempotency keys: claimed in the transaction of the counts they guard, scoped by caller,
remembered with the fingerprint of their request (the IETF Idempotency-Key draft).

A key seen within the TTL makes a request with the same fingerprint a replay: answered as
accepted, applied zero times. The same key with another fingerprint is the caller reusing
a key for a different request: refused (``KeyReused``, 422), never silently dropped. Keys
are claimed with one ``INSERT ... ON CONFLICT ... RETURNING``, so on PostgreSQL a replay sent
to another instance is caught too: the second claim waits for the first transaction and
then finds the key taken.
"""

from __future__ import annotations

from collections.abc import Sequence

from relay.core.errors import KeyReused
from relay.core.ingest_batch import IdempotencyKey
from relay.store.sql import Transaction

Outcome = bool | KeyReused
"""Of one request: applied (True), a replay (False), or refused."""


async def claim(
    tx: Transaction, keys: Sequence[IdempotencyKey], now: float, cutoff: float
) -> dict[str, str | None]:
    """Record ``keys`` as seen now, unless seen since ``cutoff``. Returns the keys already
    taken (by their scoped name) with the fingerprint they were taken with; the others
    were claimed now. The first of several items with one key in a group claims it."""
    first: dict[str, str] = {}
    for key in keys:
        first.setdefault(key.scoped, key.fingerprint)
    if not first:
        return {}
    names = sorted(first)
    rows = await tx.fetch_all(
        "INSERT INTO idempotency_keys (key, seen_at, fingerprint) VALUES "
        + ", ".join("(?, ?, ?)" for _ in names)
        + " ON CONFLICT (key) DO UPDATE SET seen_at = excluded.seen_at,"
        " fingerprint = excluded.fingerprint"
        " WHERE idempotency_keys.seen_at < ? RETURNING key",
        [*(value for name in names for value in (name, now, first[name])), cutoff],
    )
    taken = set(names) - {row[0] for row in rows}
    if not taken:
        return {}
    marks = ", ".join("?" * len(taken))
    rows = await tx.fetch_all(
        f"SELECT key, fingerprint FROM idempotency_keys WHERE key IN ({marks})", sorted(taken)
    )
    return {row[0]: row[1] for row in rows}


def outcomes(keys: Sequence[IdempotencyKey | None], taken: dict[str, str | None]) -> list[Outcome]:
    """What each request of a group comes to, given the keys already ``taken``. Pure, so both
    backends and the tests share it. A fingerprint unknown (kept before fingerprints were)
    counts as the same request."""
    claimed: dict[str, str] = {}
    result: list[Outcome] = []
    for key in keys:
        if key is None:
            result.append(True)
            continue
        if key.scoped in taken:
            known = taken[key.scoped]
        elif key.scoped in claimed:
            known = claimed[key.scoped]
        else:
            claimed[key.scoped] = key.fingerprint
            result.append(True)
            continue
        if known is None or known == key.fingerprint:
            result.append(False)
        else:
            result.append(KeyReused("This Idempotency-Key was used for a different request"))
    return result


async def prune(tx: Transaction, cutoff: float) -> int:
    return await tx.execute("DELETE FROM idempotency_keys WHERE seen_at < ?", (cutoff,))
