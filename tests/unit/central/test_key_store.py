"""``KeyStore``'s own logic (its cache, the key revision, last uses) over in-memory key
records; the SQL records are proven by the key tests on both backends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pytest

from relay.central.key_store import KeyRecord, KeyStore
from relay.core.audit import Actor
from relay.core.errors import Conflict, NotFound
from relay.core.keys import KeySpec, Principal, hash_key, new_key
from relay.wire.common import KeyType

ACTOR = Actor("admin")


@dataclass
class MemoryKeys:
    """Keys by hash, with the revision and how often each read ran."""

    keys: dict[str, KeyRecord] = field(default_factory=dict)
    used: dict[str, float] = field(default_factory=dict)
    current: int = 0
    reads: list[Sequence[str] | None] = field(default_factory=list)
    logged: list[str] = field(default_factory=list)

    async def revision(self) -> int:
        return self.current

    async def principals(self, digests: Sequence[str] | None = None) -> dict[str, Principal]:
        self.reads.append(digests)
        chosen = (
            self.keys if digests is None else {d: self.keys[d] for d in digests if d in self.keys}
        )
        return {digest: record.principal for digest, record in chosen.items()}

    async def add(
        self, digest: str, key_id: str, principal: Principal, actor: Actor | None
    ) -> bool:
        if digest in self.keys:
            return False
        self.keys[digest] = KeyRecord(key_id, principal, 0.0, None)
        if actor is not None:
            self.logged.append(key_id)
        return True

    async def count(self) -> int:
        return len(self.keys)

    async def listed(self) -> list[tuple[str, KeyRecord]]:
        return [(d, r) for d, r in self.keys.items()]

    async def revoke(self, actor: Actor, name_or_id: str) -> tuple[str, KeyRecord]:
        found = [(d, r) for d, r in self.keys.items() if r.id == name_or_id]
        found = found or [
            (d, r) for d, r in self.keys.items() if r.principal.token_name == name_or_id
        ]
        if not found:
            raise NotFound(name_or_id)
        if len(found) > 1:
            raise Conflict(name_or_id)
        del self.keys[found[0][0]]
        self.current += 1
        return found[0]

    async def write_uses(self, used: Mapping[str, float]) -> None:
        self.used.update(used)

    def revoke_elsewhere(self, spec: KeySpec) -> None:
        """Another instance revokes the key: its row goes and the revision moves."""
        del self.keys[hash_key(spec.secret)]
        self.current += 1


def client_key(name: str | None = None) -> KeySpec:
    spec = new_key(KeyType.CLIENT, "development", ("default",))
    if name is None:
        return spec
    return KeySpec(spec.secret, replace(spec.principal, token_name=name))


async def test_loaded_keys_are_known_without_a_read_and_others_are_not() -> None:
    records = MemoryKeys()
    spec = client_key()
    await records.add(hash_key(spec.secret), "k1", spec.principal, None)
    store = KeyStore(records)
    assert store.known(spec.secret) is None  # nothing in memory before ``load``
    await store.load()
    assert store.known(spec.secret) == spec.principal
    assert store.known(spec.secret + "x") is None
    assert records.reads == [None]


async def test_keys_not_in_memory_are_read_once_together_then_kept() -> None:
    records = MemoryKeys()
    store = KeyStore(records)
    await store.load()
    one, other = client_key(), client_key()
    for spec in (one, other):
        await records.add(hash_key(spec.secret), spec.secret[-4:], spec.principal, None)
    found = await store.resolve_many([one.secret, other.secret, "nobody"])
    assert found == {one.secret: one.principal, other.secret: other.principal, "nobody": None}
    assert records.reads[1:] == [
        sorted({hash_key(k) for k in (one.secret, other.secret, "nobody")})
    ]
    assert await store.resolve(one.secret) == one.principal
    assert len(records.reads) == 2  # from memory now
    assert store.known(other.secret) == other.principal


async def test_a_key_revoked_elsewhere_is_dropped_when_the_revision_moves() -> None:
    records = MemoryKeys()
    spec = client_key()
    await records.add(hash_key(spec.secret), "k1", spec.principal, None)
    store = KeyStore(records)
    await store.load()
    await store.poll()
    assert len(records.reads) == 1  # the revision did not move: no reload
    records.revoke_elsewhere(spec)
    assert store.known(spec.secret) == spec.principal
    await store.poll()
    assert store.known(spec.secret) is None


async def test_a_revoked_key_stops_at_once_and_keeps_its_last_use() -> None:
    records = MemoryKeys()
    store = KeyStore(records)
    spec = client_key("ci")
    assert await store.add(spec, "k1", ACTOR) is True
    assert await store.add(spec, "k2", ACTOR) is False
    assert records.logged == ["k1"]
    assert store.known(spec.secret) == spec.principal  # a use, noted in memory
    record = await store.revoke(ACTOR, "ci")
    assert record.id == "k1" and record.last_used_at is not None
    assert store.known(spec.secret) is None
    await store.write_uses()
    assert records.used == {}  # the revoked key's use is not written


async def test_uses_are_written_in_one_call_and_listed_before_they_are() -> None:
    records = MemoryKeys()
    store = KeyStore(records)
    spec = client_key()
    await store.add(spec, "k1")
    await store.write_uses()
    assert records.used == {}  # nothing noted: no write
    [listed] = await store.listed()
    assert listed.last_used_at is None
    assert await store.resolve(spec.secret) == spec.principal
    [listed] = await store.listed()
    assert listed.last_used_at is not None  # this worker's note, not yet written
    await store.write_uses()
    assert records.used == {hash_key(spec.secret): listed.last_used_at}
    await store.write_uses()
    assert len(records.used) == 1


async def test_revoking_an_unknown_or_ambiguous_name_changes_nothing() -> None:
    records = MemoryKeys()
    store = KeyStore(records)
    first, second = client_key("twin"), client_key("twin")
    await store.add(first, "k1")
    await store.add(second, "k2")
    with pytest.raises(Conflict):
        await store.revoke(ACTOR, "twin")
    with pytest.raises(NotFound):
        await store.revoke(ACTOR, "nobody")
    assert store.known(first.secret) == first.principal
    assert await store.count() == 2
