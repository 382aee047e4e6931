"""What the relay's flag cache holds in memory: each scope's answer once (docs/relays.md,
"Flags at a relay"), measured with tracemalloc for 100 scopes of 100 kB; and answers derived for
queries stay within their bound."""

from __future__ import annotations

import gc
import json
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

from conftest import MakeClient
from fake_upstream import Answer, FakeUpstream
from service import eventually, sample

import relay
from relay.core.client_features import Scope
from relay.edge.flags.entries import Entry
from relay.edge.flags.store import FlagScope
from relay.edge.flags.views import Views

SCOPES = 100
FLAGS = 100


def flags_of(project: str) -> dict[str, Any]:
    """About 100 kB in Unleash's format: 100 flags of about 1 kB."""
    features = [
        {
            "name": f"{project}-flag-{i:03d}",
            "type": "release",
            "enabled": True,
            "project": project,
            "stale": False,
            "strategies": [
                {
                    "name": "flexibleRollout",
                    "constraints": [
                        {
                            "contextName": "region",
                            "operator": "IN",
                            "values": [f"{project}-region-{k:02d}" for k in range(28)],
                        }
                    ],
                    "parameters": {"rollout": "50", "stickiness": "userId", "groupId": str(i)},
                    "variants": [],
                }
            ],
            "variants": [],
            "description": f"flag {i} of {project}",
            "impressionData": False,
        }
        for i in range(FLAGS)
    ]
    return {"version": 2, "features": features, "meta": {"revisionId": 1}}


def scoped(key: str) -> tuple[dict[str, Any], str]:
    """Each key's flags are those of its project (the fake upstream's ``features_for``)."""
    project = key.split(":")[0]
    return flags_of(project), f'"{project}"'


def ours() -> int:
    """Bytes allocated by the relay's own code and still held (not aiohttp's buffers, nor
    the fake upstream's, which runs in this process too)."""
    gc.collect()
    package = tracemalloc.Filter(True, str(Path(relay.__file__).parent / "*"))
    return sum(
        s.size for s in tracemalloc.take_snapshot().filter_traces([package]).statistics("filename")
    )


def stored(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "cache.db") as conn:
        return int(conn.execute("SELECT count(body) FROM flag_scopes").fetchone()[0])


async def test_100_scopes_of_100_kb_hold_each_answer_once(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.features_for = scoped
    keys = [f"project-{i:03d}:development.memory-test-secret-0123456789" for i in range(SCOPES)]
    upstream.valid_keys = dict.fromkeys(keys, "development")
    body_bytes = len(json.dumps(flags_of("project-000"), separators=(",", ":")))
    assert 90_000 < body_bytes < 110_000
    upstream.features_answer = Answer(503)  # nothing fetched yet: the baseline
    tracemalloc.start()
    try:
        relay = await make_relay(client_tokens=keys, features_refresh_interval=0.2)
        before = ours()
        upstream.features_answer = None

        async def ready() -> bool:
            return (await relay.get("/ready")).status == 200

        await eventually(ready, "every scope fetched")
        await eventually(lambda: stored(tmp_path / "relay") == SCOPES, "every copy written")
        await eventually(lambda: len(upstream.flag_fetches) > 2 * SCOPES, "a round of 304s")
        held = ours() - before
    finally:
        tracemalloc.stop()
    metrics = await (await relay.get("/internal-backstage/metrics")).text()
    answers = sample(metrics, "relay_flag_cache_bytes")
    print(
        f"{SCOPES} scopes of {body_bytes} B: {held / 1e6:.1f} MB held"
        f" ({held / SCOPES / 1000:.0f} kB a scope), answers {answers / 1e6:.1f} MB"
    )
    assert sample(metrics, "relay_flag_cache_scopes") == SCOPES
    assert answers >= SCOPES * body_bytes * 0.9
    # each answer once, and little besides: far from a parsed copy (a JSON document parsed
    # into Python objects takes 5-10 times its bytes), or a second copy of the bytes
    assert held < 1.2 * answers, (held, answers)


def test_answers_derived_for_queries_stay_within_their_bound() -> None:
    """Made-up ``namePrefix`` values cannot grow memory: the least recently used derived
    answers go, and come back rendered again when asked."""
    entry = Entry(FlagScope("development", ("p",)), Scope("development", ("p",), None, False))
    rendered = entry.take(json.dumps(flags_of("p")).encode())
    views = Views(most=3, most_bytes=10**9)
    asked = [Scope("development", ("p",), f"p-flag-00{i}", False) for i in range(5)]
    first = [views.get(entry, rendered, scope) for scope in asked]
    assert views.bytes == sum(len(view.body) for view in first[2:])  # the last three
    assert views.get(entry, rendered, asked[4]) is first[4]  # kept
    again = views.get(entry, rendered, asked[0])  # gone, rendered again
    assert again == first[0] and again is not first[0]
    assert views.get(entry, rendered, entry.base) is rendered  # the scope's own: never copied
    small = Views(most=100, most_bytes=len(first[0].body) * 2)
    for scope in asked:
        small.get(entry, rendered, scope)
    assert small.bytes <= len(first[0].body) * 2


def test_catalogs_of_scopes_stay_within_their_bound() -> None:
    """Queries on many scopes cannot grow the catalogs held: past their bytes the least
    recently used goes, and is built again from its scope's answer when asked."""
    entries = [
        Entry(FlagScope("development", (p,)), Scope("development", (p,), None, False))
        for p in ("p", "q", "r")
    ]
    answers = [e.take(json.dumps(flags_of(e.scope.projects[0])).encode()) for e in entries]
    one = len(answers[0].body) * 1.5  # a catalog: its fragments, their hashes and index
    views = Views(catalog_bytes=int(one))
    for entry, rendered in zip(entries, answers, strict=True):
        prefix = f"{entry.scope.projects[0]}-flag-00"
        view = views.get(entry, rendered, Scope("development", entry.scope.projects, prefix, False))
        assert view.features == 10
        assert views.catalog_bytes <= one
    found = views.feature(entries[0], answers[0], entries[0].base, "p-flag-001")
    assert found is not None and json.loads(found)["name"] == "p-flag-001"  # built again
    assert views.catalog_bytes <= one
